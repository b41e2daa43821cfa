//! PDF: the text layer of every page, read by PDFium (the PDF engine of Chromium) through
//! the `pdfium-render` crate, from the `libpdfium.so` that the `pypdfium2` wheel on PyPI
//! ships. The library is loaded once per process, at the first PDF; a process without it
//! reads every other kind of document and answers a PDF with
//! [`Error::PdfUnavailable`].
//!
//! Each page's text is cut into blocks at blank lines; a line ending in a hyphen before a
//! lower-case word is joined to it (`exam-` `ple` is `example`), other lines keep their
//! line break. Every block carries its page ([`crate::Block::page`], from 1).
//!
//! Refused, each with its own error: an encrypted PDF ([`Error::PdfEncrypted`]), one that
//! PDFium cannot open ([`Error::PdfDamaged`]), one whose pages hold no text at all
//! ([`Error::PdfNoText`], a scan), one of more than [`PdfLimits::max_pages`] pages
//! ([`Error::PdfTooManyPages`]), and one whose text is not read within
//! [`PdfLimits::max_time`] ([`Error::PdfTimeout`], checked after every page).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pdfium_render::prelude::{PdfDocumentMetadataTagType, Pdfium, PdfiumError, PdfiumInternalError};

use crate::block::{clean, Block, BlockKind, Parsed};
use crate::error::{Error, Result};

/// File name of PDFium's library.
pub const PDFIUM_LIBRARY: &str = "libpdfium.so";

/// How much of a PDF is read before it is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdfLimits {
    /// The most pages a PDF may have (2,000 by default).
    pub max_pages: usize,
    /// The longest its text may take to read (20 s by default: within API Gateway's 29 s).
    pub max_time: Duration,
}

impl Default for PdfLimits {
    fn default() -> Self {
        PdfLimits { max_pages: 2_000, max_time: Duration::from_secs(20) }
    }
}

/// Where PDFium's library is looked for, in order: `$SEXTANT_PDFIUM_LIB`, then
/// `pdfium/libpdfium.so` under the model directory (`$SEXTANT_MODEL_DIR`, else
/// `$SEXTANT_CACHE_DIR/models`, else `~/.cache/sextant/models`: where the model script puts
/// it), then beside the executable, then `/opt/lib` (a Lambda layer).
pub fn library_candidates() -> Vec<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(path) = var("SEXTANT_PDFIUM_LIB") {
        return vec![path];
    }
    let models = var("SEXTANT_MODEL_DIR")
        .or_else(|| var("SEXTANT_CACHE_DIR").map(|d| d.join("models")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache/sextant/models"));
    let mut out = vec![models.join("pdfium").join(PDFIUM_LIBRARY)];
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(|p| p.to_path_buf())) {
        out.push(dir.join(PDFIUM_LIBRARY));
    }
    out.push(PathBuf::from("/opt/lib").join(PDFIUM_LIBRARY));
    out
}

static PDFIUM: OnceLock<std::result::Result<Pdfium, String>> = OnceLock::new();

/// The process's PDFium, loaded from the first of [`library_candidates`] that exists, once;
/// or why it cannot be had (no library found, or one that does not load).
fn pdfium() -> Result<&'static Pdfium> {
    let loaded = PDFIUM.get_or_init(|| {
        let candidates = library_candidates();
        let Some(path) = candidates.iter().find(|p| p.is_file()) else {
            let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
            return Err(format!("{PDFIUM_LIBRARY} was not found (looked in {})", tried.join(", ")));
        };
        let bindings = Pdfium::bind_to_library(path).map_err(|e| format!("{} does not load: {e:?}", path.display()))?;
        Ok(Pdfium::new(bindings))
    });
    loaded.as_ref().map_err(|reason| Error::PdfUnavailable { reason: reason.clone() })
}

/// Whether this process can read PDFs (the library loads), and if not, why.
pub fn available() -> std::result::Result<(), String> {
    pdfium().map(|_| ()).map_err(|e| match e {
        Error::PdfUnavailable { reason } => reason,
        other => other.to_string(),
    })
}

/// Reads a PDF's text, page by page, within `limits`.
pub fn parse(bytes: &[u8], limits: PdfLimits) -> Result<Parsed> {
    let started = Instant::now();
    let pdfium = pdfium()?;
    let document = pdfium.load_pdf_from_byte_slice(bytes, None).map_err(open_error)?;
    let pages = document.pages();
    let count = pages.len().max(0) as usize;
    if count > limits.max_pages {
        return Err(Error::PdfTooManyPages { pages: count, limit: limits.max_pages });
    }
    let mut blocks = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let number = i as u32 + 1;
        let text = page.text().map(|t| t.all()).unwrap_or_default();
        blocks.extend(page_blocks(&text, number));
        if started.elapsed() > limits.max_time {
            return Err(Error::PdfTimeout { seconds: limits.max_time.as_secs_f64(), pages_read: number as usize });
        }
    }
    if blocks.is_empty() {
        return Err(Error::PdfNoText { pages: count });
    }
    let title = document
        .metadata()
        .get(PdfDocumentMetadataTagType::Title)
        .and_then(|t| clean(t.value()))
        .map(|t| t.replace('\n', " "));
    Ok(Parsed { title, blocks, front_matter: None })
}

/// Why PDFium could not open a document, in a client's words.
fn open_error(e: PdfiumError) -> Error {
    match e {
        PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::PasswordError)
        | PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::SecurityError) => Error::PdfEncrypted,
        PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::FormatError)
        | PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::FileError) => {
            Error::PdfDamaged { reason: "its structure cannot be read (is it a whole PDF file?)".into() }
        }
        other => Error::PdfDamaged { reason: format!("PDFium could not open it ({other:?})") },
    }
}

/// The blocks of one page's text: cut at blank lines, hyphenated line ends joined, control
/// characters dropped.
fn page_blocks(text: &str, page: u32) -> Vec<Block> {
    let text: String = text
        .replace("\r\n", "\n")
        .chars()
        .map(|c| match c {
            '\r' | '\n' => '\n',
            // PDFium marks a hyphen it found at a line's end as U+0002.
            '\u{2}' => '-',
            c if c.is_control() && c != '\t' => ' ',
            c => c,
        })
        .collect();
    let mut blocks = Vec::new();
    let mut current = String::new();
    let mut flush = |current: &mut String| {
        if let Some(text) = clean(current) {
            blocks.push(Block { kind: BlockKind::Paragraph, text, page: Some(page) });
        }
        current.clear();
    };
    for line in text.split('\n') {
        let line = line.trim_end();
        if line.trim().is_empty() {
            flush(&mut current);
            continue;
        }
        let joins = current.ends_with('-')
            && current[..current.len() - 1].ends_with(|c: char| c.is_alphabetic())
            && line.trim_start().starts_with(|c: char| c.is_lowercase());
        if joins {
            current.pop();
            current.push_str(line.trim_start());
        } else {
            if !current.is_empty() {
                current.push('\n');
            }
            current.push_str(line);
        }
    }
    flush(&mut current);
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/pdf").join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// CI fetches the library (`scripts/ci/fetch_models.sh`); a machine without it fails
    /// here with the reason, never passes silently.
    fn require_library() {
        if let Err(reason) = available() {
            panic!("PDFium is needed for this test: run scripts/ci/fetch_models.sh ({reason})");
        }
    }

    #[test]
    fn a_pdf_reads_page_by_page_with_its_title() {
        require_library();
        let parsed = parse(&fixture("report.pdf"), PdfLimits::default()).unwrap();
        assert_eq!(parsed.title.as_deref(), Some("Quarterly operating review"));
        for page in 1..=3u32 {
            let text: Vec<&str> =
                parsed.blocks.iter().filter(|b| b.page == Some(page)).map(|b| b.text.as_str()).collect();
            let text = text.join(" ");
            assert!(text.contains(&format!("page-{page}-marker")), "page {page}: {text:?}");
            for other in (1..=3).filter(|&o| o != page) {
                assert!(!text.contains(&format!("page-{other}-marker")), "page {page} holds page {other}'s text");
            }
        }
        let all: String = parsed.blocks.iter().map(|b| b.text.as_str()).collect::<Vec<_>>().join(" ");
        assert!(all.contains("Gross margin widened to 41 percent"), "{all}");
        assert!(all.contains("revolving credit facility"), "{all}");
        assert!(parsed.blocks.iter().all(|b| !b.text.is_empty() && !b.text.contains("\n\n")));
        assert!(parsed.blocks.windows(2).all(|w| w[0].page <= w[1].page), "pages in order");
    }

    #[test]
    fn encrypted_scanned_and_damaged_pdfs_are_refused_each_with_its_reason() {
        require_library();
        assert_eq!(parse(&fixture("encrypted.pdf"), PdfLimits::default()), Err(Error::PdfEncrypted));
        assert_eq!(parse(&fixture("scanned.pdf"), PdfLimits::default()), Err(Error::PdfNoText { pages: 3 }));
        for damaged in ["damaged.pdf", "truncated.pdf"] {
            match parse(&fixture(damaged), PdfLimits::default()) {
                Err(Error::PdfDamaged { .. }) => {}
                other => panic!("{damaged}: {other:?}"),
            }
        }
        assert!(matches!(parse(b"", PdfLimits::default()), Err(Error::PdfDamaged { .. })));
        assert!(matches!(parse(b"hello, not a pdf", PdfLimits::default()), Err(Error::PdfDamaged { .. })));
    }

    #[test]
    fn the_page_and_time_limits_refuse_a_pdf_before_it_is_read_whole() {
        require_library();
        let few = PdfLimits { max_pages: 2, ..PdfLimits::default() };
        assert_eq!(parse(&fixture("report.pdf"), few), Err(Error::PdfTooManyPages { pages: 3, limit: 2 }));
        let no_time = PdfLimits { max_time: Duration::ZERO, ..PdfLimits::default() };
        assert_eq!(parse(&fixture("report.pdf"), no_time), Err(Error::PdfTimeout { seconds: 0.0, pages_read: 1 }));
    }

    #[test]
    fn lines_join_at_hyphens_and_blocks_cut_at_blank_lines() {
        let blocks =
            page_blocks("Revenue from exam-\r\nple customers\r\n\r\nSecond cus\u{2}\r\ntomers\r\nend\u{1}.", 4);
        let texts: Vec<&str> = blocks.iter().map(|b| b.text.as_str()).collect();
        assert_eq!(texts, ["Revenue from example customers", "Second customers\nend ."]);
        assert!(blocks.iter().all(|b| b.page == Some(4)));
        assert_eq!(page_blocks("Top-\nDown", 1)[0].text, "Top-\nDown", "an upper-case word is not joined");
        assert!(page_blocks(" \r\n \u{c}", 1).is_empty());
    }
}
