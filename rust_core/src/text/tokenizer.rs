//! Word splitting that works for every script the web is written in.
//!
//! Tantivy's `SimpleTokenizer` keeps a run of Han characters as one token, so a Chinese
//! page could only be found by its whole sentence. Here Latin, Cyrillic, Greek and other
//! alphabetic scripts split on non-alphanumerics as usual, while runs of CJK characters
//! (Han, kana, Hangul) become overlapping bigrams, as Lucene's CJK analyzer does. A query
//! tokenised the same way matches any word of two or more characters inside a run.
//!
//! Each word is stemmed by its script: Cyrillic words as Russian, Greek as Greek, Arabic
//! as Arabic. Latin-script words are stemmed in the language of the page they are on
//! ([`latin_stemmer`]; English when it is unknown or has no stemmer). A query's language
//! is not known, so its Latin-script words are stemmed in each language the index holds
//! (see `ParsedQuery::add_alternates`).

use std::borrow::Cow;

use rust_stemmers::Algorithm;
use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, RemoveLongFilter, TextAnalyzer, Token, TokenFilter,
    TokenStream, Tokenizer,
};

/// Name under which the analyzer is registered in every process that opens an index.
pub const ANALYZER: &str = "bt_text";

/// The analyzer of English text, registered for titles and bodies: split, lower-case,
/// fold accents, stem each word by its script.
pub fn analyzer() -> TextAnalyzer {
    analyzer_for(Algorithm::English)
}

/// The analyzer of text in a language whose Latin-script words `latin` stems.
pub fn analyzer_for(latin: Algorithm) -> TextAnalyzer {
    TextAnalyzer::builder(MultiScriptTokenizer::default())
        .filter(RemoveLongFilter::limit(48))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(ScriptStemmer { latin })
        .build()
}

/// The stemmer of Latin-script words in `language` (a BCP 47 tag such as `de` or
/// `pt-br`): the Snowball stemmer of its primary subtag, English for the others.
pub fn latin_stemmer(language: &str) -> Algorithm {
    let primary = language.split(['-', '_']).next().unwrap_or("");
    match primary.to_ascii_lowercase().as_str() {
        "da" => Algorithm::Danish,
        "de" => Algorithm::German,
        "es" => Algorithm::Spanish,
        "fi" => Algorithm::Finnish,
        "fr" => Algorithm::French,
        "hu" => Algorithm::Hungarian,
        "it" => Algorithm::Italian,
        "nb" | "nn" | "no" => Algorithm::Norwegian,
        "nl" => Algorithm::Dutch,
        "pt" => Algorithm::Portuguese,
        "ro" => Algorithm::Romanian,
        "sv" => Algorithm::Swedish,
        "tr" => Algorithm::Turkish,
        _ => Algorithm::English,
    }
}

/// The stemmers of the other scripts, by the script index [`script_of`] gives (0 is
/// Latin, whose stemmer depends on the language).
const STEMMERS: [Algorithm; 4] = [
    Algorithm::English,
    Algorithm::Greek,
    Algorithm::Russian,
    Algorithm::Arabic,
];

/// Which of [`STEMMERS`] stems a word starting with `c`: the one language its script
/// stands for, or 0, the Latin-script stemmer (which leaves words of other scripts alone).
fn script_of(c: char) -> usize {
    match c as u32 {
        0x0370..=0x03FF | 0x1F00..=0x1FFF => 1,
        0x0400..=0x052F | 0x1C80..=0x1C8F | 0x2DE0..=0x2DFF | 0xA640..=0xA69F => 2,
        0x0600..=0x06FF | 0x0750..=0x077F | 0x08A0..=0x08FF | 0xFB50..=0xFDFF | 0xFE70..=0xFEFF => {
            3
        }
        _ => 0,
    }
}

/// Token filter stemming each token with the stemmer of its script ([`script_of`]),
/// Latin-script ones with `latin`; CJK bigrams are left as they are.
#[derive(Clone, Copy)]
pub struct ScriptStemmer {
    latin: Algorithm,
}

impl TokenFilter for ScriptStemmer {
    type Tokenizer<T: Tokenizer> = ScriptStemmerFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> ScriptStemmerFilter<T> {
        ScriptStemmerFilter {
            inner: tokenizer,
            latin: self.latin,
        }
    }
}

/// [`ScriptStemmer`] wrapped around a tokenizer.
#[derive(Clone)]
pub struct ScriptStemmerFilter<T> {
    inner: T,
    latin: Algorithm,
}

impl<T: Tokenizer> Tokenizer for ScriptStemmerFilter<T> {
    type TokenStream<'a> = ScriptStemmerStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        ScriptStemmerStream {
            tail: self.inner.token_stream(text),
            latin: self.latin,
            stemmers: Default::default(),
            buffer: String::new(),
        }
    }
}

/// Token stream of [`ScriptStemmerFilter`]; creates each script's stemmer when first needed.
pub struct ScriptStemmerStream<T> {
    tail: T,
    latin: Algorithm,
    stemmers: [Option<rust_stemmers::Stemmer>; STEMMERS.len()],
    buffer: String,
}

impl<T: TokenStream> TokenStream for ScriptStemmerStream<T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        let token = self.tail.token_mut();
        let Some(first) = token.text.chars().next().filter(|&c| !is_cjk(c)) else {
            return true;
        };
        let script = script_of(first);
        let algorithm = if script == 0 {
            self.latin
        } else {
            STEMMERS[script]
        };
        let stemmer =
            self.stemmers[script].get_or_insert_with(|| rust_stemmers::Stemmer::create(algorithm));
        match stemmer.stem(&token.text) {
            Cow::Owned(stemmed) => token.text = stemmed,
            Cow::Borrowed(stemmed) => {
                self.buffer.clear();
                self.buffer.push_str(stemmed);
                std::mem::swap(&mut token.text, &mut self.buffer);
            }
        }
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
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
