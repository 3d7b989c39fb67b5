//! Query words that carry no content: "how do I", "what is the", "a", "of".
//!
//! People write a recollection as a question ("how do I make a context manager"). Its
//! function words match almost every page, so scoring them ranks pages by how often they
//! say "how" and "do", and highlighting them marks every "a" and the "i" of "i.e.". The
//! list is the English stop list of Snowball (the source of the lists tantivy ships for its
//! other languages) with its negations, comparatives and quantity words left in the query
//! ("not", "before", "after", "more", "only", "same": a person who types them means them),
//! plus the vague nouns of a question's frame ("want", "way", "something"). Words are
//! compared after the query analyzer's stemming, so "does" matches as the index holds it.

use std::collections::HashSet;
use std::sync::OnceLock;

use tantivy::tokenizer::TokenStream;

use super::tokenizer;

/// English words that hold no content in a query.
const ENGLISH: &[&str] = &[
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "would",
    "should",
    "could",
    "ought",
    "i'm",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "to",
    "from",
    "in",
    "on",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "any",
    "both",
    "each",
    "some",
    "such",
    "so",
    "than",
    "too",
    "very",
    "can",
    "will",
    "just",
    "also",
    "into",
    "want",
    "way",
    "thing",
    "something",
    "someone",
    "somewhere",
];

/// The stemmed forms of [`ENGLISH`], as the query analyzer makes them.
fn stemmed() -> &'static HashSet<String> {
    static SET: OnceLock<HashSet<String>> = OnceLock::new();
    SET.get_or_init(|| {
        let mut analyzer = tokenizer::analyzer();
        let mut set = HashSet::new();
        for word in ENGLISH {
            let mut stream = analyzer.token_stream(word);
            while stream.advance() {
                set.insert(stream.token().text.clone());
            }
        }
        set
    })
}

/// True when `token` (an analysed query word) carries no content.
pub fn is_stop_word(token: &str) -> bool {
    stemmed().contains(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_frames_are_stop_words_and_topics_are_not() {
        for w in ["how", "do", "i", "a", "the", "what", "is", "doe"] {
            assert!(is_stop_word(w), "{w}");
        }
        for w in ["context", "manag", "make", "not", "befor", "more", "python"] {
            assert!(!is_stop_word(w), "{w}");
        }
    }
}
