//! The token alphabet of the chunked float formats: zigzag residuals as the image codec's
//! version-2 tokens widened to 32 bits (a value below 16 is its own token, a larger one a
//! token for its top two bits and raw bits below), then zero-run tokens; and the rules every
//! code-length table obeys (lengths at most [`MAX_CODE_LEN`], a complete prefix code).

pub use crate::format::floats::{alphabet, single_tokens, MAX_CODE_LEN, RUN_MAX, TOKEN_DIRECT};

/// Token of a zigzag value: `(token, raw bit count, raw bits)`. Below 16 the value is its
/// own token; else `n = floor(log2 z)`, the token is `16 + 2 (n - 4) + bit n-1 of z` and the
/// `n - 1` low bits follow raw.
#[inline(always)]
pub fn token_of(z: u32) -> (u32, u32, u32) {
    if z < TOKEN_DIRECT {
        return (z, 0, 0);
    }
    let n = 31 - z.leading_zeros();
    let nraw = n - 1;
    let m = (z >> nraw) & 1;
    (TOKEN_DIRECT + 2 * (n - 4) + m, nraw, z & ((1 << nraw) - 1))
}

/// [`token_of`] by masks instead of a branch on the value's size (for loops where small and
/// large values alternate as randomly as the data).
#[inline(always)]
pub fn token_of_masked(z: u32) -> (u32, u32, u32) {
    let n = 31 - (z | 1).leading_zeros();
    let nraw = n.saturating_sub(1);
    let m = (z >> nraw) & 1;
    let k = 0u32.wrapping_sub((z >= TOKEN_DIRECT) as u32);
    // Wrapping: below TOKEN_DIRECT (n < 4) this is masked out.
    let big = TOKEN_DIRECT.wrapping_add(n.wrapping_sub(4).wrapping_mul(2)) + m;
    let t = (big & k) | (z & !k);
    (t, nraw & k, z & ((1u32 << nraw) - 1) & k)
}

/// Token of a run of `n` zeros (2 ..= RUN_MAX) for `width`-bit values:
/// `(token, raw bit count, raw bits)`.
#[inline(always)]
pub fn run_token(width: u32, n: u32) -> (u32, u32, u32) {
    let j = 31 - n.leading_zeros();
    (single_tokens(width) + j - 1, j, n & ((1 << j) - 1))
}

/// What a token decodes to: `(base, raw bit count, is a run)`; the value (or run length) is
/// `base + raw`.
#[inline(always)]
pub fn token_base(width: u32, token: u32) -> (u32, u32, bool) {
    let t = single_tokens(width);
    if token < TOKEN_DIRECT {
        (token, 0, false)
    } else if token < t {
        let n = 4 + (token - TOKEN_DIRECT) / 2;
        let m = (token - TOKEN_DIRECT) & 1;
        ((1 << n) | (m << (n - 1)), n - 1, false)
    } else {
        let j = token - t + 1;
        (1 << j, j, true)
    }
}

/// The zigzag map in `width` bits: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ...
#[inline(always)]
pub fn zigzag(e: u32, width: u32) -> u32 {
    let s = (e << (32 - width)) as i32 >> (32 - width);
    ((s << 1) ^ (s >> 31)) as u32 & mask(width)
}

/// Inverse of [`zigzag`], mod 2^32 (callers keep the low `width` bits).
#[inline(always)]
#[cfg(test)]
pub fn unzigzag(z: u32) -> u32 {
    (z >> 1) ^ 0u32.wrapping_sub(z & 1)
}

/// The low `width` bits.
#[inline(always)]
pub const fn mask(width: u32) -> u32 {
    if width >= 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    }
}

/// Why a code-length table is invalid: a length above 11, no used token, a lone used token
/// of length other than 1, or (two or more used) a Kraft sum other than exactly 1.
pub(in crate::field) fn check_lengths(lengths: &[u8]) -> Result<(), &'static str> {
    if lengths.iter().any(|&l| l as u32 > MAX_CODE_LEN) {
        return Err("a code length exceeds 11");
    }
    let used = lengths.iter().filter(|&&l| l > 0).count();
    match used {
        0 => return Err("no token has a code"),
        1 if lengths.iter().any(|&l| l > 1) => {
            return Err("a single used token must have length 1")
        }
        1 => return Ok(()),
        _ => {}
    }
    let kraft: u32 = lengths
        .iter()
        .filter(|&&l| l > 0)
        .map(|&l| 1u32 << (MAX_CODE_LEN - l as u32))
        .sum();
    match kraft.cmp(&(1 << MAX_CODE_LEN)) {
        std::cmp::Ordering::Less => Err("the code is incomplete"),
        std::cmp::Ordering::Greater => Err("the code is over-subscribed"),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The masked token equals the branchy one: every value below 2^16, the powers of two
    /// and their neighbours, and the top of the range.
    #[test]
    fn masked_tokens_are_the_tokens() {
        let edges = (0..32).flat_map(|k| {
            let p = 1u32 << k;
            [p - 1, p, p + 1]
        });
        for z in (0..1u32 << 16).chain(edges).chain([u32::MAX - 1, u32::MAX]) {
            assert_eq!(token_of_masked(z), token_of(z), "{z}");
        }
    }
}
