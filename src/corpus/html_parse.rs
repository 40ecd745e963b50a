//! Parsing a page with a bound on how deep its elements nest.
//!
//! html5ever's tree builder looks down its stack of open elements at many start tags (is a
//! `<p>` open in button scope? in list item scope?), so a page of `n` nested `<div>`s costs
//! O(n²): 40 000 of them took 18 s. Browsers bound the nesting instead (Chromium's parser
//! stops nesting at 512 and adds deeper elements as siblings); html5ever has no such bound
//! and cannot be given one. So the page is fed to the parser in chunks while a sink
//! wrapped around scraper's own records each node's depth, and a page whose elements nest
//! deeper than [`MAX_DEPTH`] is not read: the work before stopping is bounded by the depth
//! one chunk can add. A document tree within the bound can then be walked by recursion.

use std::borrow::Cow;
use std::cell::{Cell, Ref, RefCell};
use std::collections::HashMap;

use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::{Attribute, QualName};
use scraper::{Html, HtmlTreeSink};

/// The deepest a page's elements may nest (the document node is depth 0, `<html>` 1): the
/// depth at which Chromium's HTML parser stops nesting.
pub(crate) const MAX_DEPTH: usize = 512;

/// Bytes fed to the parser between two depth checks. A start tag takes at least 3 bytes,
/// so a chunk adds at most ≈ 2 700 levels beyond the bound before the page is dropped.
const CHUNK: usize = 8 * 1024;

type Handle = <HtmlTreeSink as TreeSink>::Handle;

/// scraper's sink, recording the depth of every node it places.
struct DepthSink {
    inner: HtmlTreeSink,
    depth: RefCell<HashMap<Handle, usize>>,
    deepest: Cell<usize>,
}

impl DepthSink {
    fn depth_of(&self, node: &Handle) -> usize {
        self.depth.borrow().get(node).copied().unwrap_or(0)
    }

    fn place(&self, child: &NodeOrText<Handle>, depth: usize) {
        if let NodeOrText::AppendNode(node) = child {
            self.depth.borrow_mut().insert(*node, depth);
            self.deepest.set(self.deepest.get().max(depth));
        }
    }
}

impl TreeSink for DepthSink {
    type Output = (Html, usize);
    type Handle = Handle;
    type ElemName<'a> = Ref<'a, QualName>;

    fn finish(self) -> (Html, usize) {
        let deepest = self.deepest.get();
        (self.inner.finish(), deepest)
    }
    fn parse_error(&self, msg: Cow<'static, str>) {
        self.inner.parse_error(msg)
    }
    fn get_document(&self) -> Handle {
        self.inner.get_document()
    }
    fn elem_name<'a>(&'a self, target: &'a Handle) -> Ref<'a, QualName> {
        self.inner.elem_name(target)
    }
    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> Handle {
        self.inner.create_element(name, attrs, flags)
    }
    fn create_comment(&self, text: StrTendril) -> Handle {
        self.inner.create_comment(text)
    }
    fn create_pi(&self, target: StrTendril, data: StrTendril) -> Handle {
        self.inner.create_pi(target, data)
    }
    fn append(&self, parent: &Handle, child: NodeOrText<Handle>) {
        self.place(&child, self.depth_of(parent) + 1);
        self.inner.append(parent, child)
    }
    fn append_based_on_parent_node(
        &self,
        element: &Handle,
        prev_element: &Handle,
        child: NodeOrText<Handle>,
    ) {
        // Placed under `element`'s parent or under `prev_element`: the deeper of the two.
        let depth = self.depth_of(element).max(self.depth_of(prev_element) + 1);
        self.place(&child, depth);
        self.inner
            .append_based_on_parent_node(element, prev_element, child)
    }
    fn append_doctype_to_document(
        &self,
        name: StrTendril,
        public_id: StrTendril,
        system_id: StrTendril,
    ) {
        self.inner
            .append_doctype_to_document(name, public_id, system_id)
    }
    fn mark_script_already_started(&self, node: &Handle) {
        self.inner.mark_script_already_started(node)
    }
    fn pop(&self, node: &Handle) {
        self.inner.pop(node)
    }
    fn get_template_contents(&self, target: &Handle) -> Handle {
        self.inner.get_template_contents(target)
    }
    fn same_node(&self, x: &Handle, y: &Handle) -> bool {
        self.inner.same_node(x, y)
    }
    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.inner.set_quirks_mode(mode)
    }
    fn append_before_sibling(&self, sibling: &Handle, new_node: NodeOrText<Handle>) {
        self.place(&new_node, self.depth_of(sibling));
        self.inner.append_before_sibling(sibling, new_node)
    }
    fn add_attrs_if_missing(&self, target: &Handle, attrs: Vec<Attribute>) {
        self.inner.add_attrs_if_missing(target, attrs)
    }
    fn associate_with_form(
        &self,
        target: &Handle,
        form: &Handle,
        nodes: (&Handle, Option<&Handle>),
    ) {
        self.inner.associate_with_form(target, form, nodes)
    }
    fn remove_from_parent(&self, target: &Handle) {
        self.inner.remove_from_parent(target)
    }
    fn reparent_children(&self, node: &Handle, new_parent: &Handle) {
        // The adoption agency moves `node`'s children one level down at most; their own
        // depths are not revisited (a bound, not an exact count, is what is needed).
        self.inner.reparent_children(node, new_parent)
    }
    fn is_mathml_annotation_xml_integration_point(&self, handle: &Handle) -> bool {
        self.inner
            .is_mathml_annotation_xml_integration_point(handle)
    }
    fn set_current_line(&self, line_number: u64) {
        self.inner.set_current_line(line_number)
    }
}

/// Parses `html` as [`Html::parse_document`] does; `Err(depth)` when its elements nest
/// deeper than [`MAX_DEPTH`] (the depth reached when parsing stopped).
pub(crate) fn parse_document(html: &str) -> Result<Html, usize> {
    let sink = DepthSink {
        inner: HtmlTreeSink::new(Html::new_document()),
        depth: RefCell::default(),
        deepest: Cell::new(0),
    };
    let mut parser = html5ever::parse_document(sink, Default::default());
    let mut rest = html;
    while !rest.is_empty() {
        let mut end = rest.len().min(CHUNK);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        parser.process(StrTendril::from_slice(&rest[..end]));
        rest = &rest[end..];
        let deepest = parser.tokenizer.sink.sink.deepest.get();
        if deepest > MAX_DEPTH {
            return Err(deepest);
        }
    }
    match parser.finish() {
        (_, deepest) if deepest > MAX_DEPTH => Err(deepest),
        (doc, _) => Ok(doc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(tag: &str, n: usize) -> String {
        format!(
            "<body>{}x{}</body>",
            format!("<{tag}>").repeat(n),
            format!("</{tag}>").repeat(n)
        )
    }

    /// The same tree as scraper's own parse, whatever the chunking cuts through (a tag, a
    /// multi-byte character).
    #[test]
    fn parses_as_scraper_does() {
        let page = format!(
            "<!DOCTYPE html><html lang=en><head><title>t</title></head><body>{}<p>a<b>b<p>c</b>d\
             <table><tr><td>x</table></body></html>",
            "<p>é ü <a href='x'>link</a>".repeat(3_000)
        );
        assert!(page.len() > 4 * CHUNK);
        let ours = parse_document(&page).unwrap();
        assert_eq!(ours.html(), Html::parse_document(&page).html());
    }

    /// Issue 30, N4: 300 000 nested `<span>`s or 100 000 nested `<div>`s are refused at the
    /// bound, quickly (the div case is quadratic in html5ever: 40 000 took 18 s).
    #[test]
    fn deep_pages_stop_at_the_bound() {
        let at = nested("div", MAX_DEPTH - 3); // + html, body, the document
        assert!(parse_document(&at).is_ok());
        for (tag, n) in [("span", 300_000), ("div", 100_000)] {
            let t = std::time::Instant::now();
            let depth = parse_document(&nested(tag, n)).unwrap_err();
            assert!(depth > MAX_DEPTH, "{tag}: {depth}");
            assert!(t.elapsed().as_secs() < 5, "{tag}: {:?}", t.elapsed());
        }
    }
}
