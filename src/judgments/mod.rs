//! Judgments from outside rankd's own stores: judgments derived from the Rust docs by query
//! class (known items, item names as users type them, the guides' task phrases),
//! and feature logging of judged windows in SVMlight/LETOR format so any external learner can
//! be used too. (The judged windows themselves are `crate::training`'s data set.)

pub mod docs;
pub mod known_items;
mod svmlight;
pub mod tasks;

pub use svmlight::write_svmlight;

/// The classes of queries derived from the docs. Each is held out separately, so a model that
/// helps one and hurts another is seen (`crate::training::guard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum QueryClass {
    /// The item's name words and the first words of its summary ([`known_items::derive`]).
    KnownItem,
    /// The item's name as users type it ([`known_items::derive_names`]).
    ItemName,
    /// A guide's task phrase, judged by the items it links ([`tasks::derive_tasks`]).
    Task,
}

impl QueryClass {
    pub const ALL: [QueryClass; 3] = [
        QueryClass::KnownItem,
        QueryClass::ItemName,
        QueryClass::Task,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QueryClass::KnownItem => "known-item",
            QueryClass::ItemName => "item-name",
            QueryClass::Task => "task",
        }
    }

    /// Up to `max` queries of the class from the docs under `dir`, whose documented items
    /// are `items` (read once, [`known_items::items`], for every class), a sample by `seed`.
    pub fn derive(
        self,
        dir: &std::path::Path,
        items: &[known_items::Item],
        max: usize,
        seed: u64,
    ) -> anyhow::Result<Vec<known_items::KnownItem>> {
        Ok(match self {
            QueryClass::KnownItem => known_items::derive(items, max, seed),
            QueryClass::ItemName => known_items::derive_names(items, max, seed),
            QueryClass::Task => tasks::derive_tasks(dir, items, max, seed)?,
        })
    }
}
