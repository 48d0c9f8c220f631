//! The data the host and the shaders share: the `repr(C)` tables bound to the kernels
//! ([`ImageInfo`], [`Params`], the prefix sum's `ScanParams`, the job tables of the
//! augment, fields, levels and tensor-window kernels, the float arrays' tables and step
//! uniforms), the error flags the shaders report ([`flags`]), and the
//! workgroup constants. Every struct a shader reads is declared once, by `wgsl_struct!`, which
//! gives both the Rust struct and its WGSL `struct` text; `gpu::shaders` writes those texts
//! and constants generated from these values into each stage's source, so no WGSL mirrors
//! them by hand. No wgpu here: this module builds (and is tested) without the `gpu` feature.

// Without the `gpu` feature only the public items are used (outside tests).
#![cfg_attr(not(any(test, feature = "gpu")), allow(dead_code, unused_imports))]

use crate::format::Header;
use crate::format::Profile;
use crate::layout::OutputLayout;

/// [`ImageInfo::version`] of a version-2 file.
pub(crate) const VERSION_COMPACT: u32 = crate::format::VERSION_COMPACT as u32;
/// Workgroup size of `levels.wgsl` (`LEVELS_WG` in its generated prelude).
pub(crate) const LEVELS_WORKGROUP_SIZE: u32 = 64;
/// Workgroup size of `augment.wgsl` (`AUGMENT_WG` in its generated prelude).
pub(crate) const AUGMENT_WORKGROUP_SIZE: u32 = 64;
/// Workgroup size of `fields.wgsl` (`FIELDS_WG` in its generated prelude).
pub(crate) const FIELDS_WORKGROUP_SIZE: u32 = 64;
/// Workgroup size of `lossless.wgsl` (`LOSSLESS_WG` in its generated prelude).
pub(crate) const LOSSLESS_WORKGROUP_SIZE: u32 = 64;
/// Workgroup size of `tensor_window.wgsl` (`TENSOR_WG` in its generated prelude).
pub(crate) const TENSOR_WORKGROUP_SIZE: u32 = 64;
/// Workgroup size of `bounded.wgsl` (`BOUNDED_WG` in its generated prelude).
pub(crate) const BOUNDED_WORKGROUP_SIZE: u32 = 64;
/// The error-bounded token alphabet, from the format (`BOUNDED_PAIR0`, `BOUNDED_RUN0`,
/// `BOUNDED_PAIR_LIMIT`, `BOUNDED_MAX_BINS` in the prelude).
pub(crate) use crate::format::floats::{
    BOUNDED_MAX_BINS, PAIR0 as BOUNDED_PAIR0, PAIR_LIMIT as BOUNDED_PAIR_LIMIT,
    RUN0 as BOUNDED_RUN0,
};
/// Values of a block of a prefix-sum line in `shared/line_sum.wgsl` (`LINE_BLOCK`): a line
/// sums block by block, then the blocks' carries, then adds them, so no invocation loops
/// past llvmpipe's 65535 iterations (in all of its loops) on lines up to 2^28 values.
pub(crate) const LINE_BLOCK: u32 = 1 << 12;
/// Most values one invocation of `shared/segments.wgsl` decodes of a segment in one round
/// (one dispatch of `decode_segments`; `SEGMENT_ROUND`): a segment of more values takes
/// several rounds, so no invocation loops past llvmpipe's 65535 iterations.
pub(crate) const SEGMENT_ROUND: u32 = 1 << 15;
/// [`BoundedPass::kind`] of value 0 (its prediction is 0).
pub(crate) const PASS_ORIGIN: u32 = 0;
/// [`BoundedPass::kind`] of a linear pass.
pub(crate) const PASS_LINEAR: u32 = 1;
/// [`BoundedPass::kind`] of a cubic pass.
pub(crate) const PASS_CUBIC: u32 = 2;
/// u32 words of one exception run in `fields.wgsl`'s `runs` binding: start, length, f32 bits
/// (`RUN_WORDS` in its generated prelude).
pub(crate) const FIELD_RUN_WORDS: u32 = 3;

/// A Rust field type a shader struct may hold, and how WGSL spells it.
pub(crate) trait WgslType {
    /// The WGSL type.
    const WGSL: &'static str;
}

impl WgslType for u32 {
    const WGSL: &'static str = "u32";
}

impl WgslType for f32 {
    const WGSL: &'static str = "f32";
}

impl WgslType for [f32; 4] {
    const WGSL: &'static str = "vec4<f32>";
}

/// A field of a [`WgslStruct`].
#[derive(Debug)]
pub(crate) struct WgslField {
    /// Its name in WGSL (the Rust name, unless that is a WGSL reserved word).
    pub name: &'static str,
    /// Its WGSL type ([`WgslType::WGSL`]).
    pub ty: &'static str,
    /// Its byte offset in the Rust struct.
    #[cfg_attr(not(test), allow(dead_code))]
    pub offset: usize,
    /// Its documentation lines, written into the WGSL as comments.
    pub docs: &'static [&'static str],
}

/// A `repr(C)` struct that a shader reads, described by [`wgsl_struct!`] from the same field
/// list as the Rust struct: [`WgslStruct::declaration`] is its WGSL `struct`.
#[derive(Debug)]
pub(crate) struct WgslStruct {
    /// The struct's name, in Rust and in WGSL.
    pub name: &'static str,
    /// The Rust struct's size in bytes.
    #[cfg_attr(not(test), allow(dead_code))]
    pub size: usize,
    /// Its fields in order.
    pub fields: &'static [WgslField],
}

impl WgslStruct {
    /// The WGSL declaration: `struct Name { field: type, .. }`, each field after its
    /// documentation as `//` comments.
    pub fn declaration(&self) -> String {
        let mut out = format!("struct {} {{\n", self.name);
        for field in self.fields {
            for line in field.docs {
                out.push_str("    //");
                out.push_str(line);
                out.push('\n');
            }
            out.push_str(&format!("    {}: {},\n", field.name, field.ty));
        }
        out.push_str("}\n");
        out
    }
}

/// Declares a `repr(C)` struct that a shader reads and its WGSL twin from one field list:
/// the Rust struct (with the given derives and documentation) and `impl Name { const
/// WGSL_STRUCT: WgslStruct }`. A field's `#[wgsl = "name"]` renames it in WGSL.
macro_rules! wgsl_struct {
    (
        $(#[doc = $doc:literal])*
        #[derive($($derive:path),* $(,)?)]
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $fdoc:literal])*
                $(#[wgsl = $wname:literal])?
                $fvis:vis $field:ident: $ty:ty,
            )*
        }
    ) => {
        $(#[doc = $doc])*
        #[repr(C)]
        #[derive($($derive),*)]
        $vis struct $name {
            $(
                $(#[doc = $fdoc])*
                $fvis $field: $ty,
            )*
        }

        impl $name {
            /// The struct's WGSL twin, generated into the shaders by `gpu::shaders`.
            pub(crate) const WGSL_STRUCT: WgslStruct = WgslStruct {
                name: stringify!($name),
                size: std::mem::size_of::<$name>(),
                fields: &[$(WgslField {
                    name: wgsl_struct!(@name $($wname)? ; $field),
                    ty: <$ty as WgslType>::WGSL,
                    offset: std::mem::offset_of!($name, $field),
                    docs: &[$($fdoc),*],
                }),*],
            };
        }
    };
    (@name $wname:literal ; $field:ident) => {
        $wname
    };
    (@name ; $field:ident) => {
        stringify!($field)
    };
}

/// For the other ABI modules (`encode_abi`).
pub(crate) use wgsl_struct;

/// Error flag bits the decode shader ORs into an image's slot
/// ([`crate::error::FormatError::GpuReported`]).
pub mod flags {
    /// A stream names an unknown predictor.
    pub const PREDICTOR: u32 = 1;
    /// A row's bit width exceeds the sample depth.
    pub const BIT_WIDTH: u32 = 2;
    /// A row runs past the end of its stream.
    pub const OVERRUN: u32 = 4;
    /// A stream is longer than its rows, or its padding bits are not zero.
    pub const TRAILING: u32 = 8;
    /// A stream lies outside the uploaded bytes (an internal inconsistency).
    pub const RANGE: u32 = 16;
    /// Version 2: a patch names an unknown colour transform, or subtract-green with fewer
    /// than 3 channels.
    pub const TRANSFORM: u32 = 32;
    /// Version 2: a channel's token count or code lengths do not form a valid code.
    pub const CODE: u32 = 64;
    /// Version 2: a channel's segment-length field width exceeds 16.
    pub const SEGMENT_TABLE: u32 = 128;
    /// Version 2: a pair token where only a single-sample token may stand, or a run token
    /// past the row's end or as a position's second symbol.
    pub const SYMBOL: u32 = 256;
    /// Version 2: a segment's rows use more or fewer bits than its stored length.
    pub const SEGMENT: u32 = 512;
    /// Version 2: an index past the patch's palette.
    pub const PALETTE: u32 = 1024;
    /// Lossless float arrays: a float-mult multiplier of 2^24 or more, or a subnormal
    /// product.
    pub const MULT: u32 = 2048;
    /// Error-bounded arrays: a residual of 2^26 or more, a lattice value past the
    /// exact-product limit, or a bin past 65535. Lossless float arrays: an index past the
    /// value table.
    pub const VALUE: u32 = 4096;
}

wgsl_struct! {
    /// Per-image entry of the table the decode shaders read (`images`, declared in
    /// `shaders/decode.wgsl`; the WGSL `ImageInfo` is generated from this declaration).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct ImageInfo {
        /// Width in pixels.
        pub width: u32,
        /// Height in pixels.
        pub height: u32,
        /// Channels (1..=4).
        pub channels: u32,
        /// Bits per sample (8 or 16).
        pub depth: u32,
        /// log2 of the patch size.
        pub patch_log2: u32,
        /// Patches per row of the decoded patch grid: the image's, or the window's (`patch_col0`).
        pub patches_x: u32,
        /// First stream of the image (chunk-local index).
        pub stream_base: u32,
        /// Streams of the image.
        pub stream_count: u32,
        /// First output word (4 bytes: u32 or f32) of the image (or band) in the chunk's output
        /// binding.
        pub out_base: u32,
        /// Output words of the image (without alignment padding).
        pub out_words: u32,
        /// Index of the image in its batch (its error-flag slot).
        pub image_index: u32,
        /// First decode workgroup of the image; a workgroup decodes
        /// [`patches_per_workgroup`] patches (version 1) or one patch (version 2).
        pub wg_base: u32,
        /// Format version of the file ([`crate::format::VERSION_FAST`] or
        /// [`crate::format::VERSION_COMPACT`]): which entry point decodes it (`main` or
        /// `main_compact`).
        pub version: u32,
        /// Patch column and row (from the first row of the entry's output) of the first decoded
        /// patch: 0 and 0 for a whole image or band; a window's corner when only the patches a
        /// crop needs are decoded. Patch `p` of the entry's streams is the patch at column
        /// `patch_col0 + p % patches_x`, row `patch_row0 + p / patches_x`.
        pub patch_col0: u32,
        /// See `patch_col0`.
        pub patch_row0: u32,
        /// The file's error bound (0: lossless): stored samples are bins, written as
        /// `min(v * (2 max_error + 1), 2^depth - 1)` (`crate::quantize::dequantize`).
        pub max_error: u32,
    }
}

/// Invocations of a decode workgroup (`WG` in the shaders).
pub const DECODE_WORKGROUP_SIZE: u32 = 64;

/// Stream bits indexing the compact decoder's first-level lookup table (the shader's
/// `FAST_BITS`, through the generated prelude; the CPU twin's table size).
pub(crate) const FAST_BITS: u32 = 8;

/// Elements per workgroup of the prefix sum.
pub(crate) const WG_256: u64 = 256;

/// Alignment of each image (and chunk) in the output buffer.
pub(crate) const OUT_ALIGN: u64 = 256;

/// Patches (each with all its channels' streams) one decode workgroup takes, in a version-1
/// file, for a patch size `1 << patch_log2`: 64 / patch size, at least 1. (In a version-2
/// file a workgroup takes one patch, i.e. one stream: [`workgroups_of`].)
pub const fn patches_per_workgroup(patch_log2: u8) -> u32 {
    let ps = 1u32 << patch_log2;
    if ps >= DECODE_WORKGROUP_SIZE {
        1
    } else {
        DECODE_WORKGROUP_SIZE / ps
    }
}

/// Decode workgroups of `streams` consecutive streams (whole patches) of a file with header
/// `h`: version 1 packs [`patches_per_workgroup`] patches, each with one stream per channel,
/// into a workgroup; version 2 gives each patch (one stream) a workgroup of its own, whatever
/// the patch size, since its segments and channels decode in parallel inside it.
pub fn workgroups_of(h: &Header, streams: u32) -> u32 {
    match h.profile {
        Profile::Fast => {
            (streams / h.channels().max(1) as u32).div_ceil(patches_per_workgroup(h.patch_log2))
        }
        Profile::Compact => streams,
    }
}

wgsl_struct! {
    /// Per-dispatch parameters of the decode stages (`params`, declared in
    /// `shaders/decode.wgsl`; the WGSL `Params` is generated from this declaration).
    #[derive(Debug, Clone, Copy, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct Params {
        /// Work items: decode workgroups.
        pub count: u32,
        /// Images in the chunk's image table.
        pub image_count: u32,
        /// Bytes of stream data uploaded.
        pub input_bytes: u32,
        /// Chunk-local index ([`ImageInfo::wg_base`] numbering) of the dispatch's first
        /// workgroup.
        pub first_workgroup: u32,
        /// Per-channel mean for [`OutputLayout::F32Chw`]: `output/f32_chw.wgsl` writes
        /// `(x / max - mean[c]) / std[c]`.
        pub mean: [f32; 4],
        /// Per-channel standard deviation for [`OutputLayout::F32Chw`] (`stdev` in WGSL, where
        /// `std` is a reserved word).
        #[wgsl = "stdev"]
        pub std: [f32; 4],
    }
}

wgsl_struct! {
    /// Per-level parameters of the prefix sum (`sp` in `shaders/prefix_sum.wgsl`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct ScanParams {
        /// Elements at this level.
        pub n: u32,
        /// Word offset of this level's elements in `scan`.
        pub data_offset: u32,
        /// Word offset of this level's block totals (the next level's elements).
        pub sums_offset: u32,
        /// Padding to 16 bytes.
        pub pad: u32,
    }
}

/// The levels of the prefix sum over `n` elements: (n, data_offset, sums_offset) in words,
/// and the total words of the scan buffer.
pub(crate) fn scan_levels(n: u32) -> (Vec<ScanParams>, u64) {
    let mut levels = Vec::new();
    let (mut n, mut off) = (n, 0u32);
    loop {
        let blocks = n.div_ceil(WG_256 as u32);
        let sums = off + n;
        levels.push(ScanParams {
            n,
            data_offset: off,
            sums_offset: sums,
            pad: 0,
        });
        if blocks <= 1 {
            return (levels, sums as u64 + 1);
        }
        off = sums;
        n = blocks;
    }
}

/// The output-layout families that have their own decode shader (`shaders/output/*.wgsl`)
/// and pipelines: the key, with the format version, of the decoder's pipeline table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum LayoutKind {
    /// [`OutputLayout::Interleaved`]: `shaders/output/interleaved.wgsl`.
    Interleaved,
    /// [`OutputLayout::F32Chw`]: `shaders/output/f32_chw.wgsl`.
    F32Chw,
}

impl LayoutKind {
    /// Every kind.
    pub const ALL: [LayoutKind; 2] = [LayoutKind::Interleaved, LayoutKind::F32Chw];

    /// The kind of `layout`.
    pub fn of(layout: OutputLayout) -> LayoutKind {
        match layout {
            OutputLayout::Interleaved => LayoutKind::Interleaved,
            OutputLayout::F32Chw(_) => LayoutKind::F32Chw,
        }
    }
}

mod blocks;
mod floats;
mod stages;
pub(crate) use blocks::*;
pub(crate) use floats::*;
pub(crate) use stages::*;

/// Every struct a shader reads, for the layout test.
#[cfg(test)]
pub(crate) const WGSL_STRUCTS: [&WgslStruct; 13] = [
    &ImageInfo::WGSL_STRUCT,
    &Params::WGSL_STRUCT,
    &ScanParams::WGSL_STRUCT,
    &AugmentJob::WGSL_STRUCT,
    &FieldJob::WGSL_STRUCT,
    &LevelJob::WGSL_STRUCT,
    &LosslessSegment::WGSL_STRUCT,
    &LosslessArray::WGSL_STRUCT,
    &LosslessStep::WGSL_STRUCT,
    &BoundedArray::WGSL_STRUCT,
    &BoundedPass::WGSL_STRUCT,
    &BoundedStep::WGSL_STRUCT,
    &TensorWindowJob::WGSL_STRUCT,
];

/// Asserts that `s`'s generated WGSL, laid out by naga, has the size and field offsets of
/// the Rust struct (for the ABI modules' tests).
#[cfg(test)]
pub(crate) fn assert_wgsl_layout(s: &WgslStruct) {
    let src = s.declaration();
    let module = naga::front::wgsl::parse_str(&src)
        .unwrap_or_else(|e| panic!("{}: {}", s.name, e.emit_to_string(&src)));
    let (handle, ty) = module
        .types
        .iter()
        .find(|(_, ty)| ty.name.as_deref() == Some(s.name))
        .unwrap_or_else(|| panic!("{}: no such WGSL struct", s.name));
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).unwrap();
    assert_eq!(layouter[handle].size as usize, s.size, "{}: size", s.name);
    let naga::TypeInner::Struct { members, span } = &ty.inner else {
        panic!("{}: not a struct", s.name);
    };
    assert_eq!(*span as usize, s.size, "{}: span", s.name);
    assert_eq!(members.len(), s.fields.len(), "{}: fields", s.name);
    for (member, field) in members.iter().zip(s.fields) {
        assert_eq!(member.name.as_deref(), Some(field.name), "{}", s.name);
        assert_eq!(
            member.offset as usize, field.offset,
            "{}.{}: offset",
            s.name, field.name
        );
        let size = layouter[member.ty].size as usize;
        assert_eq!(
            member.offset as usize + size,
            s.fields
                .iter()
                .find(|f| f.offset > field.offset)
                .map_or(s.size, |f| f.offset),
            "{}.{}: size",
            s.name,
            field.name
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_layouts_match_the_wgsl_structs() {
        // 16 u32 fields (with padding) and 4 u32 + 8 f32: what the shaders' structs occupy.
        assert_eq!(std::mem::size_of::<ImageInfo>(), 64);
        assert_eq!(std::mem::size_of::<Params>(), 48);
        assert_eq!(std::mem::size_of::<ScanParams>(), 16);
    }

    /// Each struct's generated WGSL, laid out by naga, has the size and field offsets of the
    /// Rust struct: the host writes exactly what the shaders read.
    #[test]
    fn generated_wgsl_structs_have_the_rust_layout() {
        for s in WGSL_STRUCTS {
            assert_wgsl_layout(s);
        }
    }

    #[test]
    fn generated_wgsl_struct_text() {
        assert_eq!(
            FieldJob::WGSL_STRUCT.declaration(),
            "struct FieldJob {\n    // Values.\n    count: u32,\n    // Exception runs.\n    \
             run_count: u32,\n    // f32 bits of the value of bin 0.\n    offset_bits: u32,\n    \
             // f32 bits of the bin width (8 significant bits).\n    bin_bits: u32,\n    \
             // First word of the bin image in the dispatch's `bins` binding.\n    \
             bins_offset: u32,\n    // First word of the runs in the dispatch's `runs` \
             binding.\n    runs_offset: u32,\n    // First value in the dispatch's `values` \
             binding.\n    values_offset: u32,\n    // First workgroup of the job in its \
             dispatch.\n    wg_base: u32,\n    // Workgroups of the job.\n    wg_count: u32,\n}\n"
        );
        let params = Params::WGSL_STRUCT.declaration();
        assert!(params.contains("    mean: vec4<f32>,\n"), "{params}");
        assert!(params.contains("    stdev: vec4<f32>,\n"), "{params}");
    }

    #[test]
    fn scan_levels_cover_every_block() {
        let (levels, words) = scan_levels(1);
        assert_eq!((levels.len(), words), (1, 2));
        // 65_537 elements: 257 blocks, then 2, then 1.
        let (levels, words) = scan_levels(65_537);
        let ns: Vec<u32> = levels.iter().map(|l| l.n).collect();
        assert_eq!(ns, [65_537, 257, 2]);
        assert_eq!(words, 65_537 + 257 + 2 + 1);
    }

    #[test]
    fn workgroups_per_stream() {
        assert_eq!(patches_per_workgroup(3), 8);
        assert_eq!(patches_per_workgroup(6), 1);
        assert_eq!(patches_per_workgroup(7), 1);
    }
}
