//! The token alphabet of the chunked float array formats (`SPEC.md`, "Lossless float arrays"
//! and "Error-bounded float arrays"), named once here: below both the CPU codec
//! (`field::core::tokens`, `field::bounded`, which re-export them) and the GPU engine (`gpu`,
//! whose generated WGSL prelude is written from them), so the kernels cannot drift from the
//! format and no test has to hold copies equal.

/// Longest code, in bits.
pub const MAX_CODE_LEN: u32 = 11;
/// Zigzag values below this are their own token.
pub const TOKEN_DIRECT: u32 = 16;
/// Run tokens: token `T + j - 1` (j = 1..=RUN_TOKENS) is a run of `2^j + raw(j bits)` zeros.
pub const RUN_TOKENS: u32 = 10;
/// Longest run one token codes.
pub const RUN_MAX: u32 = (2 << RUN_TOKENS) - 1;

/// Single (non-run) tokens for values of `width` bits.
pub const fn single_tokens(width: u32) -> u32 {
    TOKEN_DIRECT + 2 * (width - 4)
}

/// Size of the token alphabet for `width`-bit values: singles then run tokens.
pub const fn alphabet(width: u32) -> u32 {
    single_tokens(width) + RUN_TOKENS
}

/// Bins of the error-bounded differences predictor at most (their product with the bin width
/// is exact).
pub const BOUNDED_MAX_BINS: u32 = 1 << 16;
/// Zigzag values of an error-bounded pair token are below this.
pub const PAIR_LIMIT: u32 = 4;
/// Error-bounded zero-run tokens: token `RUN0 + j - 1` (j = 1..=BOUNDED_RUN_TOKENS) is a run
/// of `2^j + raw(j bits)` zeros.
pub const BOUNDED_RUN_TOKENS: u32 = 14;
/// Longest run one error-bounded token codes.
pub const BOUNDED_RUN_MAX: u32 = (2 << BOUNDED_RUN_TOKENS) - 1;
/// Single tokens of error-bounded arrays (32-bit zigzag values).
pub const SINGLES: u32 = single_tokens(32);
/// The first pair token.
pub const PAIR0: u32 = SINGLES;
/// The first run token.
pub const RUN0: u32 = PAIR0 + PAIR_LIMIT * PAIR_LIMIT;
/// Size of the error-bounded token alphabet.
pub const BOUNDED_ALPHABET: u32 = RUN0 + BOUNDED_RUN_TOKENS;
