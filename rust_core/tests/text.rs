//! The text analyzer: how titles, bodies and queries become terms, by script and language.

use backtrail_core::text::tokenizer::{analyzer, analyzer_for, latin_stemmer};
use tantivy::tokenizer::{TextAnalyzer, TokenStream};

fn tokens(text: &str) -> Vec<String> {
    tokens_by(&mut analyzer(), text)
}

fn tokens_by(a: &mut TextAnalyzer, text: &str) -> Vec<String> {
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
    assert_eq!(tokens("Мир"), ["мир"]);
    assert_eq!(tokens("ΜΙΚΡΟ"), tokens("μικρο"));
}

#[test]
fn russian_inflections_share_a_stem() {
    assert_eq!(tokens("самовар самовара Самоваром"), ["самовар"; 3]);
}

#[test]
fn greek_inflections_share_a_stem() {
    assert_eq!(tokens("θάλασσα θάλασσας"), ["θαλασσ"; 2]);
    assert_eq!(tokens("ΜΕΣΟΓΕΙΟΥ λαδιού"), tokens("Μεσόγειος λάδι"));
}

#[test]
fn arabic_words_are_stemmed_as_arabic() {
    assert_eq!(tokens("المكتبة مكتبة"), ["مكتب"; 2]);
}

#[test]
fn each_word_of_a_mixed_text_is_stemmed_by_its_own_script() {
    assert_eq!(
        tokens("running самовара 数据库"),
        ["run", "самовар", "数据", "据库"]
    );
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

#[test]
fn latin_script_words_are_stemmed_in_the_language_given() {
    let stems =
        |language: &str, text: &str| tokens_by(&mut analyzer_for(latin_stemmer(language)), text);
    assert_eq!(stems("de-AT", "Bücher Büchern"), ["buch"; 2]);
    assert_eq!(stems("fr", "cheval chevaux"), ["cheval"; 2]);
    assert_eq!(
        stems("pt_BR", "cantar cantaram"),
        stems("pt", "cantam cantar")
    );
    // Other scripts keep their own stemmer; an unknown language is English.
    assert_eq!(stems("de", "самовара"), ["самовар"]);
    assert_eq!(stems("xx", "running"), ["run"]);
    assert_eq!(stems("", "Bücher"), ["bucher"]);
}
