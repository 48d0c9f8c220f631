//! The compact CPU decoder's per-thread state: each channel's decode tables and the row
//! buffers, all ROW wide whatever the patch size (see `decode.rs`, which uses them).

use super::huffman::{PositionTables, LUT_SIZE, MAX_TOKENS};
use super::palette::PatchPalette;
use crate::format::Header;

/// A channel's decode tables, indexed by the next 11 (`MAX_CODE_LEN`) stream bits (symbols)
/// and the next 10 (`POSITION_BITS`; whole positions). The channels' tables lie side by
/// side in one vector, so the decode loop reaches all of them from one pointer.
pub(crate) struct Tables {
    /// Symbol by symbol (see `huffman::fill_lut`).
    pub(super) symbols: [u32; LUT_SIZE],
    /// Whole positions (see `huffman::fill_position_lut`).
    pub(super) positions: PositionTables,
    /// The code lengths the tables were built for (all 0: not built yet). Neighbouring
    /// patches often share a code (flat and smooth areas), and then the tables are reused.
    pub(super) lengths: [u8; MAX_TOKENS],
}

/// The first `C` channels' tables, as one array (see [`rows_mut`]).
#[inline(always)]
pub(super) fn tables_of<const C: usize>(tables: &[Tables]) -> &[Tables; C] {
    tables[..C].try_into().expect("C channels")
}

/// One channel's row of residuals as pairs (see `huffman::pack_pair`): a position is one
/// store.
pub(super) type Pairs = [u32; ROW / 2];

/// Row buffers are this wide whatever the patch size, so the decode loop indexes fixed-size
/// arrays and needs no bounds checks.
pub(super) const ROW: usize = 1 << crate::format::PATCH_LOG2_MAX;

/// Per-thread buffers: decode tables and rows (`channels x ROW` each).
pub(crate) struct Scratch {
    pub(super) tables: Vec<Tables>,
    pub(super) current: Vec<u16>,
    pub(super) previous: Vec<u16>,
    /// Rows after undoing the colour transform.
    pub(super) output: Vec<u16>,
    /// The prediction's part from the row above.
    pub(super) above: Vec<u16>,
    /// Residuals of the row being decoded, one array per channel.
    pub(super) residuals: Vec<Pairs>,
    /// Residuals of the next row, decoded with the current one.
    pub(super) pending: Vec<Pairs>,
    /// Residuals of the next three rows of a one-channel patch, decoded with the current one.
    pub(super) ahead: Box<[Pairs; 3]>,
    /// The patch's palette.
    pub(super) palette: PatchPalette,
}

impl Scratch {
    /// Runs `f` with this thread's scratch for a file with header `h`.
    ///
    /// A new scratch costs more than decoding a small band: its tables are about 17 KB per
    /// channel, built and cleared field by field (about 136 000 instructions for an RGB
    /// file: 43 % of a whole decode of a 500x375 label map, 2 % of a 6 MP photo's). So each
    /// thread keeps the scratch of its last band, between bands and between files, and
    /// `f` gets it back when the channel count matches (a new one otherwise). That is one
    /// stated buffer of `channels x` about 19 KB per thread that has decoded a compact
    /// file, released when the thread ends.
    ///
    /// The tables are marked unbuilt (all-zero code lengths, which no valid code has)
    /// before `f` runs, so they are rebuilt from the file's own codes: nothing of another
    /// file (whose depth, and so its tables for the same lengths, may differ) is used.
    pub(crate) fn with<R>(h: &Header, f: impl FnOnce(&mut Scratch) -> R) -> R {
        thread_local! {
            static KEPT: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
        }
        let kept = KEPT.with(|k| k.take());
        let mut scratch = match kept {
            Some(mut s) if s.tables.len() == h.channels() as usize => {
                for t in &mut s.tables {
                    t.lengths = [0; MAX_TOKENS];
                }
                s
            }
            _ => Box::new(Scratch::new(h)),
        };
        let result = f(&mut scratch);
        KEPT.with(|k| k.set(Some(scratch)));
        result
    }

    pub(crate) fn new(h: &Header) -> Self {
        let n = h.channels() as usize * ROW;
        Scratch {
            tables: (0..h.channels())
                .map(|_| Tables {
                    symbols: [0; LUT_SIZE],
                    positions: PositionTables::new(),
                    lengths: [0; MAX_TOKENS],
                })
                .collect(),
            current: vec![0; n],
            previous: vec![0; n],
            output: vec![0; n],
            above: vec![0; n],
            residuals: vec![[0; ROW / 2]; h.channels() as usize],
            pending: vec![[0; ROW / 2]; h.channels() as usize],
            ahead: Box::new([[0; ROW / 2]; 3]),
            palette: PatchPalette::new(),
        }
    }
}

/// The first `C` channels' rows, as one array: the decode loop then reaches every channel's
/// row from one base pointer at a fixed offset.
#[inline(always)]
pub(super) fn rows_mut<const C: usize>(buf: &mut [Pairs]) -> &mut [Pairs; C] {
    (&mut buf[..C]).try_into().expect("C rows")
}
