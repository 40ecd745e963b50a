//! RankLib's LambdaMART model file (`java -jar RankLib.jar -ranker 6 … -save m.txt`), as
//! `ciir.umass.edu.learning.tree.Ensemble` evaluates it: the score is
//! `Σ_t weight_t · tree_t(x)`; a split sends `x` left iff `x[feature] ≤ threshold` (Java
//! `float`s); a NaN value is read as 0, as RankLib's `DataPoint` does (it stores NaN as an
//! unknown value and reads an unknown value as 0; checked with RankLib 2.10, where a row
//! with NaN features scores as the same row with zeros), so a NaN goes where 0 goes;
//! feature ids are 1-based (RankLib's `DataPoint` ids, as in the SVMlight file). The format, as RankLib 2.x writes it:
//!
//! ```text
//! ## LambdaMART
//! ## No. of trees = 2
//! …                                  (more `##` comment lines)
//! <ensemble>
//!   <tree id="1" weight="0.1">
//!     <split>
//!       <feature> 3 </feature>
//!       <threshold> 0.25 </threshold>
//!       <split pos="left"> <output> -1.5 </output> </split>
//!       <split pos="right"> … a nested split or an output … </split>
//!     </split>
//!   </tree>
//! </ensemble>
//! ```
//!
//! The tree weight is folded into the leaf values (`output · weight` in `f64`). RankLib
//! models carry no feature names: they bind by position (id `i` is the feature set's
//! feature `i − 1`). The file's own normalisation option (`-norm`) is not in the model;
//! rows must arrive as RankLib saw them.

use super::{Imported, Library};
use crate::rerank::gbdt::forest::{Forest, Node, Tree};

/// A tag or a text token, with its line.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open {
        name: String,
        attrs: Vec<(String, String)>,
    },
    Close(String),
    Text(String),
}

fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let trimmed = raw.trim();
        if trimmed.starts_with("##") || trimmed.is_empty() {
            continue;
        }
        let mut rest = trimmed;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('<') {
                let end = after
                    .find('>')
                    .ok_or_else(|| format!("line {line}: `<` without `>`"))?;
                let tag = &after[..end];
                rest = after[end + 1..].trim_start();
                if let Some(name) = tag.strip_prefix('/') {
                    out.push((line, Token::Close(name.trim().to_string())));
                } else {
                    // The attributes follow the name; measured from a tag without leading
                    // blanks, `name.len()` is where they start (`< a>` would cut a character).
                    let tag = tag.trim_start();
                    let name = tag
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    let attrs = parse_attrs(&tag[name.len()..])
                        .map_err(|e| format!("line {line}: <{name}>: {e}"))?;
                    out.push((line, Token::Open { name, attrs }));
                }
            } else {
                let end = rest.find('<').unwrap_or(rest.len());
                out.push((line, Token::Text(rest[..end].trim().to_string())));
                rest = &rest[end..];
            }
        }
    }
    Ok(out)
}

/// `key="value"` pairs.
fn parse_attrs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut attrs = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or("attribute without `=`")?;
        let key = rest[..eq].trim().to_string();
        let after = rest[eq + 1..].trim_start();
        let inner = after
            .strip_prefix('"')
            .ok_or("attribute value without quotes")?;
        let close = inner.find('"').ok_or("unterminated attribute value")?;
        attrs.push((key, inner[..close].to_string()));
        rest = inner[close + 1..].trim_start();
    }
    Ok(attrs)
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    at: usize,
    /// The largest feature id seen.
    max_id: usize,
}

impl Parser {
    fn line(&self) -> usize {
        self.tokens
            .get(self.at)
            .or(self.tokens.last())
            .map_or(0, |t| t.0)
    }

    fn next(&mut self) -> Result<Token, String> {
        let t = self
            .tokens
            .get(self.at)
            .cloned()
            .ok_or("the file ends inside the ensemble")?;
        self.at += 1;
        Ok(t.1)
    }

    fn expect_open(&mut self, want: &str) -> Result<Vec<(String, String)>, String> {
        let line = self.line();
        match self.next()? {
            Token::Open { name, attrs } if name == want => Ok(attrs),
            other => Err(format!("line {line}: expected <{want}>, found {other:?}")),
        }
    }

    fn expect_close(&mut self, want: &str) -> Result<(), String> {
        let line = self.line();
        match self.next()? {
            Token::Close(name) if name == want => Ok(()),
            other => Err(format!("line {line}: expected </{want}>, found {other:?}")),
        }
    }

    /// `<name> text </name>`, the text parsed.
    fn element<T: std::str::FromStr>(&mut self, name: &str) -> Result<T, String> {
        self.expect_open(name)?;
        let line = self.line();
        let value = match self.next()? {
            Token::Text(t) => t
                .parse::<T>()
                .map_err(|_| format!("line {line}: <{name}> holds `{t}`, not a number"))?,
            other => return Err(format!("line {line}: <{name}> holds {other:?}")),
        };
        self.expect_close(name)?;
        Ok(value)
    }

    /// Opens the `<split pos="…">` of a split's child.
    fn open_child(&mut self, pos: &str) -> Result<(), String> {
        let line = self.line();
        let attrs = self.expect_open("split")?;
        if !attrs.iter().any(|(k, v)| k == "pos" && v == pos) {
            return Err(format!("line {line}: expected <split pos=\"{pos}\">"));
        }
        Ok(())
    }

    /// The content of a `<split>` (already opened) up to its `</split>`: appends the tree to
    /// `nodes`, its root first. Nesting is followed with a stack of the open splits, not by
    /// recursion: a file may nest as deep as it likes without touching the thread's stack
    /// (the depth is then bounded by [`Forest::validate`]).
    fn split_body(&mut self, nodes: &mut Vec<Node>, weight: f64) -> Result<(), String> {
        // The splits whose children are being read: (node, children read).
        let mut open: Vec<(usize, usize)> = Vec::new();
        loop {
            let me = nodes.len();
            let line = self.line();
            match self.tokens.get(self.at).map(|t| &t.1) {
                Some(Token::Open { name, .. }) if name == "output" => {
                    let output: f32 = self.element("output")?;
                    if !output.is_finite() {
                        return Err(format!("line {line}: leaf output {output}"));
                    }
                    nodes.push(Node::Leaf {
                        value: f64::from(output) * weight,
                    });
                }
                Some(Token::Open { name, .. }) if name == "feature" => {
                    let id: i64 = self.element("feature")?;
                    if id < 1 {
                        return Err(format!(
                            "line {line}: feature id {id}; RankLib ids start at 1"
                        ));
                    }
                    let id = super::check_feature_count(id as u64, "feature id")
                        .map_err(|e| format!("line {line}: {e}"))?;
                    self.max_id = self.max_id.max(id);
                    let threshold: f32 = self.element("threshold")?;
                    if threshold.is_nan() {
                        return Err(format!("line {line}: NaN threshold"));
                    }
                    nodes.push(Node::Split {
                        feature: (id - 1) as u32,
                        threshold,
                        // RankLib reads NaN as 0.
                        nan_left: 0.0 <= threshold,
                        zero_missing: false,
                        left: 0,
                        right: 0,
                    });
                    open.push((me, 0));
                    self.open_child("left")?;
                    continue;
                }
                other => {
                    return Err(format!(
                        "line {line}: a split holds {other:?}, expected <feature> or <output>"
                    ))
                }
            }
            // Node `me` is complete up to its `</split>`: it is its parent's next child;
            // a parent with both children is complete in turn.
            let mut done = me;
            loop {
                self.expect_close("split")?;
                let Some((parent, read)) = open.last_mut() else {
                    return Ok(());
                };
                if let Node::Split { left, right, .. } = &mut nodes[*parent] {
                    *(if *read == 0 { left } else { right }) = done as u32;
                }
                *read += 1;
                if *read == 1 {
                    self.open_child("right")?;
                    break;
                }
                done = *parent;
                open.pop();
            }
        }
    }
}

/// Parses a RankLib LambdaMART model (see the module doc).
pub fn parse(text: &str) -> Result<Imported, String> {
    let first = text.lines().next().unwrap_or_default().trim();
    if first.starts_with("##") && !first.contains("LambdaMART") && !first.contains("MART") {
        return Err(format!(
            "line 1 is `{first}`: not a RankLib LambdaMART or MART model"
        ));
    }
    let mut p = Parser {
        tokens: tokenize(text)?,
        at: 0,
        max_id: 0,
    };
    p.expect_open("ensemble")?;
    let mut trees = Vec::new();
    loop {
        let line = p.line();
        match p.next()? {
            Token::Close(name) if name == "ensemble" => break,
            Token::Open { name, attrs } if name == "tree" => {
                let weight: f32 = attrs
                    .iter()
                    .find(|(k, _)| k == "weight")
                    .ok_or_else(|| format!("line {line}: <tree> without weight"))?
                    .1
                    .parse()
                    .map_err(|_| format!("line {line}: tree weight is not a number"))?;
                if !weight.is_finite() {
                    return Err(format!("line {line}: tree weight {weight}"));
                }
                p.expect_open("split")?;
                let mut nodes = Vec::new();
                p.split_body(&mut nodes, f64::from(weight))?;
                p.expect_close("tree")?;
                trees.push(Tree::new(nodes));
            }
            other => return Err(format!("line {line}: expected <tree>, found {other:?}")),
        }
    }
    if trees.is_empty() {
        return Err("the ensemble has no tree".into());
    }
    let num_features = super::check_feature_count(p.max_id as u64, "feature id")?;
    let forest = Forest {
        num_features: num_features.max(1),
        base_score: 0.0,
        trees,
    };
    forest.validate()?;
    Ok(Imported {
        library: Library::Ranklib,
        objective: Some("LambdaMART".into()),
        feature_names: None,
        forest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = "## LambdaMART\n## No. of trees = 2\n## Learning rate = 0.1\n\n\
        <ensemble>\n\t<tree id=\"1\" weight=\"0.1\">\n\t\t<split>\n\t\t\t<feature> 2 </feature>\n\
        \t\t\t<threshold> 0.5 </threshold>\n\t\t\t<split pos=\"left\">\n\
        \t\t\t\t<output> -1.5 </output>\n\t\t\t</split>\n\t\t\t<split pos=\"right\">\n\
        \t\t\t\t<feature> 1 </feature>\n\t\t\t\t<threshold> -0.25 </threshold>\n\
        \t\t\t\t<split pos=\"left\">\n\t\t\t\t\t<output> 2.0 </output>\n\t\t\t\t</split>\n\
        \t\t\t\t<split pos=\"right\">\n\t\t\t\t\t<output> 4.0 </output>\n\t\t\t\t</split>\n\
        \t\t\t</split>\n\t\t</split>\n\t</tree>\n\t<tree id=\"2\" weight=\"0.5\">\n\
        \t\t<split>\n\t\t\t<output> 3.0 </output>\n\t\t</split>\n\t</tree>\n</ensemble>\n";

    #[test]
    fn hand_model_by_hand() {
        let m = parse(MODEL).unwrap();
        assert_eq!(m.forest.num_features, 2);
        // 0.1·tree1 + 0.5·3: x2 ≤ 0.5 → −1.5; else x1 ≤ −0.25 → 2, else 4. NaN reads as 0.
        let f32w = |v: f32| f64::from(v) * f64::from(0.1f32);
        let cases = [
            ([0.0, 0.5], f32w(-1.5) + 1.5),
            ([-0.25, 0.6], f32w(2.0) + 1.5),
            ([0.0, 0.6], f32w(4.0) + 1.5),
            ([f32::NAN, f32::NAN], f32w(-1.5) + 1.5),
            ([f32::NAN, 0.6], f32w(4.0) + 1.5),
        ];
        for (row, want) in cases {
            assert_eq!(m.forest.predict_row(&row), want, "{row:?}");
        }
    }

    #[test]
    fn refusals_are_clear() {
        let err = |s: String| parse(&s).unwrap_err();
        assert!(
            err(MODEL.replace("<feature> 2 </feature>", "<feature> 0 </feature>"))
                .contains("line 8: feature id 0")
        );
        assert!(err(MODEL.replace(
            "pos=\"right\">\n\t\t\t\t<feature>",
            "pos=\"middle\">\n\t\t\t\t<feature>"
        ))
        .contains("expected <split pos=\"right\">"));
        assert!(
            err(MODEL.replace("<output> 3.0 </output>", "<output> x </output>"))
                .contains("not a number")
        );
        assert!(err(MODEL.replace("</ensemble>\n", "")).contains("ends inside"));
        assert!(err("## Coordinate Ascent\n<ensemble></ensemble>".into()).contains("not a RankLib"));
    }

    /// Issue 30, N2: a tree nested deeper than a thread's stack allows is read without
    /// recursion (≈ 8 000 levels aborted the server), and refused by the depth limit.
    #[test]
    fn deep_nesting_is_no_stack_overflow() {
        let nested = |depth: usize| {
            let mut s =
                String::from("## LambdaMART\n<ensemble>\n<tree id=\"1\" weight=\"1\">\n<split>\n");
            for k in 0..depth {
                s.push_str(&format!(
                    "<feature> 1 </feature> <threshold> {k} </threshold>\n\
                     <split pos=\"left\"> <output> {k} </output> </split>\n<split pos=\"right\">\n"
                ));
            }
            s.push_str("<output> -1 </output>\n");
            s.push_str(&"</split>\n".repeat(depth + 1));
            s.push_str("</tree>\n</ensemble>\n");
            s
        };
        let text = nested(crate::rerank::gbdt::forest::MAX_TREE_DEPTH);
        let forest = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || parse(&text).map(|m| m.forest))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(forest.trees[0].depth(), 2048);
        assert_eq!(forest.predict_row(&[5.5]), 6.0);
        assert_eq!(forest.predict_row(&[1e9]), -1.0);
        let text = nested(20_000);
        let e = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || parse(&text).unwrap_err())
            .unwrap()
            .join()
            .unwrap();
        assert!(e.contains("20000 splits deep; at most 2048"), "{e}");
    }

    /// Found by the `model` fuzz target: a tag opening with a blank before a multi-byte
    /// character panicked on a slice inside that character.
    #[test]
    fn a_blank_before_the_tag_name_is_no_panic() {
        let text = MODEL.replace("<ensemble>", "< </\u{a9}>\n<ensemble>");
        assert!(parse(&text).is_err());
        assert!(parse(&MODEL.replace("<ensemble>", "< ensemble>")).is_ok());
    }
}
