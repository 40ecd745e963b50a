//! The declarative index configuration (`index/rankd.toml`): fields, analyzers and the
//! parameters of every scoring model (SPEC §1).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::models::ModelKind;

/// The text fields of a document, in schema order. `all` is the catch-all concatenation of
/// the others; the single-field models rank by it unless told otherwise.
pub const TEXT_FIELDS: [&str; 7] = [
    TextField::Title.name(),
    TextField::Name.name(),
    TextField::Headings.name(),
    TextField::Body.name(),
    TextField::Anchor.name(),
    TextField::Url.name(),
    TextField::All.name(),
];

/// A text field of a document, by the name the configuration, `/search?field=` and
/// `rankd eval --field` use ([`TEXT_FIELDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextField {
    Title,
    /// The name (and path) of the item a page documents: `std::collections::HashMap`, a
    /// product's model name; from rustdoc's page heading or a JSONL `name` key.
    Name,
    Headings,
    Body,
    Anchor,
    Url,
    All,
}

impl TextField {
    /// Every text field, in schema order.
    pub const FIELDS: [TextField; 7] = [
        TextField::Title,
        TextField::Name,
        TextField::Headings,
        TextField::Body,
        TextField::Anchor,
        TextField::Url,
        TextField::All,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            TextField::Title => "title",
            TextField::Name => "name",
            TextField::Headings => "headings",
            TextField::Body => "body",
            TextField::Anchor => "anchor",
            TextField::Url => "url",
            TextField::All => "all",
        }
    }
}

impl std::str::FromStr for TextField {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TextField::FIELDS
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown field `{s}` (known: {})", TEXT_FIELDS.join(", ")))
    }
}

impl std::fmt::Display for TextField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The configuration shipped in the repository, used when no file is given.
pub(crate) const DEFAULT_CONFIG: &str = include_str!("../../index/rankd.toml");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexConfig {
    /// The field single-field models rank by when a search names none.
    pub default_field: TextField,
    /// The first-phase model of a search that names none.
    pub default_model: ModelKind,
    pub fields: BTreeMap<String, FieldConfig>,
    pub models: ModelParams,
    /// How hits are grouped for `collapse=` (SPEC §8); baked into the index.
    #[serde(default)]
    pub collapse: CollapseConfig,
    /// The parameters of SPEC §1.8's static and social scores; read at query time.
    #[serde(default)]
    pub social: SocialParams,
    /// Which language a search prefers when its requester states none; read at query time.
    #[serde(default)]
    pub language: LanguageParams,
}

/// `[language]`: the version of a page that stands for its translations when hits are
/// collapsed by page and neither `lang=` nor the requester's `Accept-Language` names a
/// language (`crate::search::collapse`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LanguageParams {
    /// A primary language subtag (`crate::corpus::lang`).
    pub default: String,
}

impl Default for LanguageParams {
    fn default() -> Self {
        LanguageParams {
            default: "en".into(),
        }
    }
}

/// How `collapse=page` groups documents: a document's page key is its URL without query and
/// fragment, rewritten by each rule in turn (a regex replaced everywhere it matches), so
/// translated or mirrored copies of one page share a key. Computed at indexing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollapseConfig {
    #[serde(default)]
    pub page_rules: Vec<PageRule>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageRule {
    /// A regular expression (Rust `regex` syntax) over the URL.
    pub pattern: String,
    /// What each match becomes (`$1` names a capture group).
    pub replace: String,
}

impl CollapseConfig {
    /// The rules compiled, or the first that is not a valid regular expression.
    pub fn compile(&self) -> anyhow::Result<Vec<(regex::Regex, String)>> {
        self.page_rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let re = regex::Regex::new(&r.pattern).with_context(|| {
                    format!("collapse.page_rules[{i}]: invalid pattern {:?}", r.pattern)
                })?;
                Ok((re, r.replace.clone()))
            })
            .collect()
    }
}

/// SPEC §1.8's parameters (defaults from the formulas' sources; see `crate::features::social`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SocialParams {
    /// Exponential decay's half-life, in days (`fresh.decay`).
    pub half_life_days: f64,
    /// Hacker News gravity G.
    pub gravity: f64,
    /// The Wilson lower bound's z (1.96: 95%; Reddit's code uses 1.281551565545, 80%).
    pub wilson_z: f64,
    /// The Bayesian average's prior weight m, in ratings.
    pub bayes_prior_count: f64,
}

impl Default for SocialParams {
    fn default() -> Self {
        SocialParams {
            half_life_days: 365.0,
            gravity: 1.8,
            wilson_z: 1.96,
            bayes_prior_count: 10.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldConfig {
    pub analyzer: Analyzer,
    #[serde(default)]
    pub bm25: Bm25Params,
    /// Absent: the field takes no part in BM25F.
    #[serde(default)]
    pub bm25f: Option<Bm25fFieldParams>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Analyzer {
    /// Unicode words, lowercase, English stop words, Snowball English stemmer.
    EnStem,
    /// As `EnStem` without the stemmer.
    En,
    /// Unicode words and lowercase only.
    Plain,
    /// As `EnStem`, reading identifiers as users type them (`crate::text::identifiers`):
    /// `HashMap` and `hash_map` yield `hash`, `map` and the joined `hashmap`; prose is
    /// analysed exactly as by `EnStem`.
    Code,
}

impl Analyzer {
    /// Every analyzer, in the order of their discriminants.
    pub const ALL: [Analyzer; 4] = [
        Analyzer::EnStem,
        Analyzer::En,
        Analyzer::Plain,
        Analyzer::Code,
    ];

    /// The name under which the analyzer is registered with tantivy.
    pub fn name(self) -> &'static str {
        match self {
            Analyzer::EnStem => "en_stem",
            Analyzer::En => "en",
            Analyzer::Plain => "plain",
            Analyzer::Code => "code",
        }
    }
}

/// SPEC §1.3: per-field k1 and b.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bm25Params {
    pub k1: f32,
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

/// SPEC §1.4: the weight `w_u` and length normalisation `b_u` of a field in BM25F.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bm25fFieldParams {
    pub weight: f32,
    pub b: f32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelParams {
    pub bm25f: Bm25fParams,
    #[serde(default)]
    pub tfidf: TfIdfParams,
    pub f2exp: F2ExpParams,
    pub lm: LmParams,
    pub proximity: ProximityParams,
    /// Absent from older index configurations: the defaults apply.
    #[serde(default)]
    pub rm3: Rm3Params,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bm25fParams {
    pub k1: f32,
}

/// SPEC §1.2 has no free parameters; the table exists so the file names every model.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TfIdfParams {}

/// SPEC §1.5 defaults k = 0.35, s = 0.5.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct F2ExpParams {
    pub k: f32,
    pub s: f32,
}

/// SPEC §1.6 default μ = 2000.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LmParams {
    pub mu: f32,
}

/// SPEC §1.7 default α = 0.3.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProximityParams {
    pub alpha: f32,
}

/// RM3 pseudo-relevance feedback, the reranker's `rm3.*` features (`src/features/prf.rs`):
/// the first-phase top `fb_docs` candidates are the feedback documents, the `fb_terms` most
/// probable relevance-model terms expand the query, and `lambda` is the original query's
/// weight in the interpolation. Defaults from the literature (Abdul-Jaleel et al. 2004;
/// Lin et al.'s Anserini defaults are 10 documents, 10 terms, 0.5): 10, 20, 0.5.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rm3Params {
    pub fb_docs: usize,
    pub fb_terms: usize,
    pub lambda: f32,
}

impl Rm3Params {
    /// Caps that bound the cost of the features: documents read and re-analysed, and
    /// postings lists opened per candidate window.
    pub const MAX_FB_DOCS: usize = 50;
    pub const MAX_FB_TERMS: usize = 100;
}

impl Default for Rm3Params {
    fn default() -> Self {
        Rm3Params {
            fb_docs: 10,
            fb_terms: 20,
            lambda: 0.5,
        }
    }
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig::parse(DEFAULT_CONFIG, "built-in index/rankd.toml")
            .expect("the built-in index configuration is valid")
    }
}

impl IndexConfig {
    pub fn load(path: &Path) -> anyhow::Result<IndexConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read index configuration {}", path.display()))?;
        IndexConfig::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, origin: &str) -> anyhow::Result<IndexConfig> {
        let config: IndexConfig = toml::from_str(text)
            .with_context(|| format!("invalid index configuration {origin}"))?;
        config
            .validate()
            .with_context(|| format!("invalid index configuration {origin}"))?;
        Ok(config)
    }

    fn validate(&self) -> anyhow::Result<()> {
        for name in TEXT_FIELDS {
            if !self.fields.contains_key(name) {
                bail!(
                    "field `{name}` is missing (every one of {TEXT_FIELDS:?} must be configured; \
                     copy its `[fields.{name}]` table from the built-in index/rankd.toml)"
                );
            }
        }
        for (name, field) in &self.fields {
            if !TEXT_FIELDS.contains(&name.as_str()) {
                bail!("unknown field `{name}` (known: {TEXT_FIELDS:?})");
            }
            let Bm25Params { k1, b } = field.bm25;
            if !(k1.is_finite() && k1 >= 0.0 && (0.0..=1.0).contains(&b)) {
                bail!("fields.{name}.bm25: need k1 >= 0 and 0 <= b <= 1, got k1 = {k1}, b = {b}");
            }
            if let Some(p) = field.bm25f {
                if !(p.weight.is_finite() && p.weight >= 0.0 && (0.0..=1.0).contains(&p.b)) {
                    bail!("fields.{name}.bm25f: need weight >= 0 and 0 <= b <= 1");
                }
                if name == "all" {
                    bail!("fields.all cannot take part in BM25F: it repeats the other fields");
                }
            }
        }
        let m = &self.models;
        if !(m.bm25f.k1.is_finite() && m.bm25f.k1 >= 0.0) {
            bail!("models.bm25f.k1 must be >= 0");
        }
        if !(m.f2exp.k > 0.0 && m.f2exp.s > 0.0) {
            bail!("models.f2exp: k and s must be > 0");
        }
        if !(m.lm.mu > 0.0 && m.lm.mu.is_finite()) {
            bail!("models.lm.mu must be > 0");
        }
        if m.proximity.alpha.is_nan() || m.proximity.alpha <= 0.0 {
            bail!("models.proximity.alpha must be > 0");
        }
        self.collapse.compile()?;
        let p = self.social;
        for (name, v) in [
            ("half_life_days", p.half_life_days),
            ("gravity", p.gravity),
            ("wilson_z", p.wilson_z),
            ("bayes_prior_count", p.bayes_prior_count),
        ] {
            if !(v.is_finite() && v > 0.0) {
                bail!("social.{name} must be a finite number > 0, got {v}");
            }
        }
        let lang = &self.language.default;
        if crate::corpus::lang::normalize(lang).as_ref() != Some(lang) {
            bail!("language.default must be a lowercase primary language subtag such as \"en\", got {lang:?}");
        }
        let r = m.rm3;
        if !(1..=Rm3Params::MAX_FB_DOCS).contains(&r.fb_docs)
            || !(1..=Rm3Params::MAX_FB_TERMS).contains(&r.fb_terms)
            || !(0.0..=1.0).contains(&r.lambda)
        {
            bail!(
                "models.rm3: need 1 <= fb_docs <= {}, 1 <= fb_terms <= {}, 0 <= lambda <= 1",
                Rm3Params::MAX_FB_DOCS,
                Rm3Params::MAX_FB_TERMS
            );
        }
        Ok(())
    }

    /// Hash of everything baked into the index (fields and analyzers). Scoring parameters are
    /// left out: they apply at query time.
    pub fn analysis_hash(&self) -> String {
        let mut h = Sha256::new();
        for (name, field) in &self.fields {
            h.update(name.as_bytes());
            h.update(b"=");
            h.update(field.analyzer.name().as_bytes());
            h.update(b";");
        }
        // Page keys are computed at indexing: other rules need a re-ingest.
        for rule in &self.collapse.page_rules {
            h.update(b"page_rule=");
            h.update(rule.pattern.as_bytes());
            h.update(b"->");
            h.update(rule.replace.as_bytes());
            h.update(b";");
        }
        hex(&h.finalize())
    }

    /// Hash of the whole configuration, recorded in the manifest for provenance.
    pub fn full_hash(&self) -> String {
        let text = toml::to_string(self).expect("configuration serialises");
        hex(&Sha256::digest(text.as_bytes()))
    }

    pub fn field(&self, name: &str) -> &FieldConfig {
        &self.fields[name]
    }
}

/// `bytes` in lowercase hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_config_parses() {
        let c = IndexConfig::default();
        assert_eq!(c.default_field, TextField::All);
        assert_eq!(c.default_model, ModelKind::Bm25F);
        // Written back as read: the hash of a stored configuration stays the same.
        let text = toml::to_string(&c).unwrap();
        assert!(text.contains("default_field = \"all\""), "{text}");
        assert!(text.contains("default_model = \"bm25f\""), "{text}");
        for f in TextField::FIELDS {
            assert_eq!(f.name().parse::<TextField>(), Ok(f));
        }
        assert!("colour"
            .parse::<TextField>()
            .unwrap_err()
            .contains("unknown field `colour`"));
        assert_eq!(c.field("title").bm25f.unwrap().weight, 3.0);
        assert!(c.field("all").bm25f.is_none());
    }

    #[test]
    fn rejects_unknown_keys_and_bad_values() {
        let bad = DEFAULT_CONFIG.replace("default_model = \"bm25f\"", "default_model = \"x\"");
        let err = IndexConfig::parse(&bad, "t").unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown variant `x`"),
            "{err:#}"
        );
        let bad = DEFAULT_CONFIG.replace("default_field = \"all\"", "default_field = \"x\"");
        assert!(IndexConfig::parse(&bad, "t").is_err());
        let bad = DEFAULT_CONFIG.replace("mu = 2000.0", "mu = -1.0");
        assert!(IndexConfig::parse(&bad, "t").is_err());
        for (from, to) in [
            ("fb_terms = 20", "fb_terms = 0"),
            ("fb_docs = 10", "fb_docs = 51"),
            ("lambda = 0.5", "lambda = 1.5"),
        ] {
            let bad = DEFAULT_CONFIG.replace(from, to);
            assert!(IndexConfig::parse(&bad, "t").is_err(), "{to} accepted");
        }
        // An index configuration from before [models.rm3] gets the defaults.
        let start = DEFAULT_CONFIG.find("[models.rm3]").unwrap();
        let old = IndexConfig::parse(&DEFAULT_CONFIG[..start], "t").unwrap();
        assert_eq!(old.models.rm3, Rm3Params::default());
        // A configuration written before the `name` field says which table to add.
        let start = DEFAULT_CONFIG.find("[fields.name]").unwrap();
        let end = start + DEFAULT_CONFIG[start..].find("\n\n").unwrap();
        let old = format!("{}{}", &DEFAULT_CONFIG[..start], &DEFAULT_CONFIG[end..]);
        let err = format!("{:#}", IndexConfig::parse(&old, "t").unwrap_err());
        assert!(err.contains("`[fields.name]`"), "{err}");
        let bad = DEFAULT_CONFIG.replace("default = \"en\"", "default = \"en-US\"");
        assert!(
            IndexConfig::parse(&bad, "t").is_err(),
            "language.default en-US accepted"
        );
        let start = DEFAULT_CONFIG.find("[language]").unwrap();
        let old = IndexConfig::parse(&DEFAULT_CONFIG[..start], "t").unwrap();
        assert_eq!(old.language.default, "en");
        let bad = format!("{DEFAULT_CONFIG}\nextra = 1\n");
        let err = IndexConfig::parse(&bad, "t").unwrap_err();
        assert!(format!("{err:#}").contains("extra"), "{err:#}");
    }

    #[test]
    fn analysis_hash_ignores_scoring_parameters() {
        let a = IndexConfig::default();
        let mut b = a.clone();
        b.models.lm.mu = 500.0;
        assert_eq!(a.analysis_hash(), b.analysis_hash());
        assert_ne!(a.full_hash(), b.full_hash());
        b.fields.get_mut("body").unwrap().analyzer = Analyzer::En;
        assert_ne!(a.analysis_hash(), b.analysis_hash());
    }
}
