//! Word splitting that works for every script the web is written in.
//!
//! Tantivy's `SimpleTokenizer` keeps a run of Han characters as one token, so a Chinese
//! page could only be found by its whole sentence. Here Latin, Cyrillic, Greek and other
//! alphabetic scripts split on non-alphanumerics as usual, while runs of CJK characters
//! (Han, kana, Hangul) become overlapping bigrams, as Lucene's CJK analyzer does. A query
//! tokenised the same way matches any word of two or more characters inside a run.

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, Stemmer, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};

/// Name under which the analyzer is registered in every process that opens an index.
pub const ANALYZER: &str = "bt_text";

/// The analyzer used for titles and bodies: split, lower-case, fold accents, stem English.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(MultiScriptTokenizer::default())
        .filter(RemoveLongFilter::limit(48))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// True for characters of scripts written without spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F  // CJK Extensions B-F, compatibility supplement
    )
}

/// Splits text into words, and CJK runs into bigrams.
#[derive(Clone, Default)]
pub struct MultiScriptTokenizer {
    token: Token,
}

/// Token stream of [`MultiScriptTokenizer`].
pub struct MultiScriptTokenStream<'a> {
    text: &'a str,
    pos: usize,
    /// Byte offsets of the CJK run being emitted as bigrams, and where in it we are.
    cjk: Option<(usize, usize)>,
    token: &'a mut Token,
}

impl Tokenizer for MultiScriptTokenizer {
    type TokenStream<'a> = MultiScriptTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> MultiScriptTokenStream<'a> {
        self.token.reset();
        MultiScriptTokenStream {
            text,
            pos: 0,
            cjk: None,
            token: &mut self.token,
        }
    }
}

impl MultiScriptTokenStream<'_> {
    fn emit(&mut self, from: usize, to: usize) -> bool {
        self.token.text.clear();
        self.token.text.push_str(&self.text[from..to]);
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = self.token.position.wrapping_add(1);
        true
    }

    /// Emits the next bigram of the current CJK run (which has at least two characters
    /// left) and moves the run forward by one character.
    fn next_bigram(&mut self, start: usize, end: usize) -> bool {
        let mut chars = self.text[start..end].chars();
        let first = start + chars.next().map_or(0, char::len_utf8);
        let second = first + chars.next().map_or(0, char::len_utf8);
        self.cjk = (second < end).then_some((first, end));
        self.emit(start, second)
    }
}

impl TokenStream for MultiScriptTokenStream<'_> {
    fn advance(&mut self) -> bool {
        if let Some((start, end)) = self.cjk {
            return self.next_bigram(start, end);
        }
        let rest = &self.text[self.pos..];
        let Some((skip, first)) = rest.char_indices().find(|(_, c)| c.is_alphanumeric()) else {
            self.pos = self.text.len();
            return false;
        };
        let start = self.pos + skip;
        let cjk = is_cjk(first);
        let len = self.text[start..]
            .char_indices()
            .find(|&(_, c)| !c.is_alphanumeric() || is_cjk(c) != cjk)
            .map_or(self.text.len() - start, |(off, _)| off);
        let end = start + len;
        self.pos = end;
        if cjk && self.text[start..end].chars().nth(1).is_some() {
            return self.next_bigram(start, end);
        }
        self.emit(start, end)
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<String> {
        let mut a = analyzer();
        let mut stream = a.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    #[test]
    fn english_words_are_lowercased_and_stemmed() {
        assert_eq!(
            tokens("Running databases, quickly!"),
            ["run", "databas", "quick"]
        );
    }

    #[test]
    fn chinese_runs_become_bigrams() {
        assert_eq!(tokens("数据库索引"), ["数据", "据库", "库索", "索引"]);
        assert_eq!(tokens("的 数据"), ["的", "数据"]);
    }

    #[test]
    fn mixed_scripts_split_at_script_changes() {
        assert_eq!(tokens("PostgreSQL数据库"), ["postgresql", "数据", "据库"]);
    }

    #[test]
    fn cyrillic_and_greek_words_are_kept_whole_and_lowercased() {
        assert_eq!(tokens("Привет Мир"), ["привет", "мир"]);
        assert_eq!(tokens("Καλημέρα κόσμε"), ["καλημέρα", "κόσμε"]);
    }

    #[test]
    fn accents_are_folded() {
        assert_eq!(tokens("café naïve"), ["cafe", "naiv"]);
    }

    #[test]
    fn offsets_point_at_the_source_text() {
        let mut a = analyzer();
        let text = "ab 数据库";
        let mut stream = a.token_stream(text);
        let mut spans = Vec::new();
        while stream.advance() {
            let t = stream.token();
            spans.push(text[t.offset_from..t.offset_to].to_string());
        }
        assert_eq!(spans, ["ab", "数据", "据库"]);
    }
}
