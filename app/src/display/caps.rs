//! Display caps: how much of a stored record any page shows. Every display function stops
//! building at these sizes (it never builds more and cuts afterwards), so a page's memory and
//! time are bounded by what it shows, not by the size or shape of the record. What is cut says
//! so on the page and links to the raw download. Documented in `docs/limits.md` ("Display
//! caps"); keep the two in step.
//!
//! Sizes are in bytes of UTF-8 text *as shown*: a neutralised character (see
//! [`super::visible`]) counts with the length of its marker.

/// A value shown as JSON or text: at most this many bytes of the (re-indented) text.
pub const VALUE_TEXT_BYTES: usize = 256 * 1024;
/// A value shown as a hex dump: at most this many bytes of it (1024 lines of 16).
pub const VALUE_HEX_BYTES: usize = 16 * 1024;
/// A key shown as JSON or text (keys are usually short; they get a smaller share of the page).
pub const KEY_TEXT_BYTES: usize = 16 * 1024;
/// A key shown as a hex dump, in bytes of the key.
pub const KEY_HEX_BYTES: usize = 1024;
/// Deepest JSON nesting that is indented further; deeper levels keep this indentation, so a
/// line is never more than `2 × JSON_INDENT_LEVELS` spaces of indentation.
pub const JSON_INDENT_LEVELS: usize = 32;

/// Headers shown in the header table, in record order; the rest are counted.
pub const HEADERS_SHOWN: usize = 200;
/// A header name, as shown.
pub const HEADER_NAME_BYTES: usize = 256;
/// A header's decoded value (text or number), as shown in the table.
pub const HEADER_VALUE_BYTES: usize = 1024;
/// A header value's raw bytes shown as hex in the table.
pub const HEADER_HEX_BYTES: usize = 128;

/// The stack trace on the detail page, in bytes of text.
pub const STACK_TRACE_BYTES: usize = 64 * 1024;
/// The stack trace on the detail page, in lines.
pub const STACK_TRACE_LINES: usize = 1000;
/// The error message on the detail page.
pub const ERROR_MESSAGE_BYTES: usize = 8 * 1024;
/// Decode warnings listed on the detail page; the rest are counted.
pub const WARNINGS_SHOWN: usize = 20;
/// One decode warning.
pub const WARNING_BYTES: usize = 512;

/// A name or one-line fact (topic, consumer group, error class, message id), on any page.
pub const NAME_BYTES: usize = 256;
/// The error message of a list row or an error group (the row shows its first line shortened;
/// this much is in the tooltip).
pub const ROW_MESSAGE_BYTES: usize = 1024;
/// A filter suggestion longer than this is not offered (a suggestion must be exact to filter,
/// so it is dropped rather than cut).
pub const SUGGESTION_BYTES: usize = 256;

/// Upper bound of a detail page's HTML, in bytes: the caps above, with HTML escaping (up to
/// 5× for `&`), the page's markup and the hydration data (the shown parts again, as base64 of
/// JSON). A typical dead letter's page is a few KiB to a few hundred KiB.
pub const DETAIL_PAGE_BYTES: usize = 8 * 1024 * 1024;
