//! The compact profile (format version 2): per-patch subtract-green, gradient prediction and
//! canonical Huffman codes over residual tokens, in segments that decode independently. The
//! syntax and constants are in [`crate::format::compact`].

pub(crate) mod decode;
pub(crate) mod encode;
pub(crate) mod huffman;
