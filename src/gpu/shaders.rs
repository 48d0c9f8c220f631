//! WGSL sources of the GPU decoder. WGSL has no `#include`: [`source`] assembles each
//! stage's final source, the one function both the pipelines and the naga validation test
//! use. Every stage starts with the generated [`prelude`] (constants) and the WGSL `struct`s
//! it reads, generated from `gpu::abi` ([`Stage::structs`]). The decode stage is then the
//! shared files, the output layout's file (`shaders/output/*.wgsl`: its output binding and
//! `put_sample`) and the shared entry points (`shaders/decode.wgsl`), so that one file per
//! layout is all a new layout adds.

use super::abi::{self, LayoutKind, WgslStruct};
use super::encode_abi;

const BITS: &str = include_str!("../../shaders/shared/bits.wgsl");
const LINE_SUM: &str = include_str!("../../shaders/shared/line_sum.wgsl");
const SEGMENTS: &str = include_str!("../../shaders/shared/segments.wgsl");
const FLOAT_ARRAYS: &str = include_str!("../../shaders/shared/float_arrays.wgsl");
const F16: &str = include_str!("../../shaders/shared/f16.wgsl");
const PREDICT: &str = include_str!("../../shaders/shared/predict.wgsl");
const IMAGES: &str = include_str!("../../shaders/shared/images.wgsl");
const JOBS: &str = include_str!("../../shaders/shared/jobs.wgsl");
const PREFIX_SUM: &str = include_str!("../../shaders/prefix_sum.wgsl");
const DECODE_STREAMS: &str = include_str!("../../shaders/shared/decode_streams.wgsl");
const DECODE_COMPACT: &str = include_str!("../../shaders/shared/decode_compact.wgsl");
const DECODE: &str = include_str!("../../shaders/decode.wgsl");
const OUTPUT_INTERLEAVED: &str = include_str!("../../shaders/output/interleaved.wgsl");
const OUTPUT_F32_CHW: &str = include_str!("../../shaders/output/f32_chw.wgsl");
const LEVELS: &str = include_str!("../../shaders/levels.wgsl");
const FIELDS: &str = include_str!("../../shaders/fields.wgsl");
const AUGMENT: &str = include_str!("../../shaders/augment.wgsl");
const LOSSLESS: &str = include_str!("../../shaders/lossless.wgsl");
const TENSOR_WINDOW: &str = include_str!("../../shaders/tensor_window.wgsl");
const BOUNDED: &str = include_str!("../../shaders/bounded.wgsl");
const ENCODE_BINDINGS: &str = include_str!("../../shaders/shared/encode_bindings.wgsl");
const TOKENIZE: &str = include_str!("../../shaders/shared/tokenize.wgsl");
const ENCODE_QUANTISE: &str = include_str!("../../shaders/encode_quantise.wgsl");
const ENCODE_DIFFERENCES: &str = include_str!("../../shaders/encode_differences.wgsl");
const ENCODE_HISTOGRAM: &str = include_str!("../../shaders/encode_histogram.wgsl");
const ENCODE_PACK: &str = include_str!("../../shaders/encode_pack.wgsl");
const BLOCKS: &str = include_str!("../../shaders/blocks.wgsl");

/// A pipeline stage: one shader module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Stage {
    /// `prefix_sum.wgsl`: stream sizes to byte offsets (entry points `scan_blocks`, `add_sums`).
    PrefixSum,
    /// The decode for one output layout: `decode.wgsl`'s entry points (`main` for version-1
    /// images, `main_compact` for version 2) over the shared decode bodies, writing through
    /// the layout's `put_sample` (`output/interleaved.wgsl` or `output/f32_chw.wgsl`).
    Decode(LayoutKind),
    /// `levels.wgsl` after `shared/jobs.wgsl`: progressive levels from decoded payloads (entry
    /// points `refine`, `subsample`).
    Levels,
    /// `augment.wgsl` after `shared/jobs.wgsl` and `shared/f16.wgsl`: crop, resize, flip and
    /// normalise a decoded image into the batch tensor (entry point `augment`).
    Augment,
    /// `fields.wgsl` after `shared/jobs.wgsl`: float32 field values from a decoded bin image
    /// (entry point `reconstruct_field`).
    Fields,
    /// `lossless.wgsl` after `shared/segments.wgsl`, `shared/line_sum.wgsl` and
    /// `shared/float_arrays.wgsl`: lossless float arrays (entry points `decode_segments`,
    /// `undiff`, `finish`).
    Lossless,
    /// `tensor_window.wgsl` after `shared/jobs.wgsl` and `shared/f16.wgsl`: windows of tensor
    /// records into the batch tensors (entry point `tensor_window`).
    TensorWindow,
    /// `bounded.wgsl` after `shared/segments.wgsl`, `shared/line_sum.wgsl` and
    /// `shared/float_arrays.wgsl`: error-bounded float arrays of 1 to 4 axes (entry points
    /// `decode_segments`, `undiff`, `lattice_pass`, `finish`).
    Bounded,
    /// `encode_quantise.wgsl` after `shared/encode_bindings.wgsl`: the error-bounded
    /// encoder's extent, bins and exception fill (entry points `value_range`, `quantise`,
    /// `fill_blocks`, `fill_carry`, `fill_apply`).
    EncodeQuantise,
    /// `encode_differences.wgsl`: the bins' zigzag differences and the axis sets' estimate
    /// (entry points `differences`, `estimate`).
    EncodeDifferences,
    /// `encode_histogram.wgsl` after `shared/tokenize.wgsl`: token histograms per segment
    /// and token set (entry point `histogram`).
    EncodeHistogram,
    /// `encode_pack.wgsl` after `shared/tokenize.wgsl`: the segments' bits (entry point
    /// `pack`).
    EncodePack,
    /// `blocks.wgsl`: block-coded arrays (entry points `blocks_histogram`, `blocks_code`,
    /// `blocks_sizes`, `blocks_scan`, `blocks_pack`, `blocks_decode`).
    Blocks,
}

impl Stage {
    /// Every stage: the prefix sum and the decode for every output layout.
    #[cfg_attr(not(test), allow(dead_code))]
    pub const ALL: [Stage; 14] = [
        Stage::PrefixSum,
        Stage::Decode(LayoutKind::Interleaved),
        Stage::Decode(LayoutKind::F32Chw),
        Stage::Levels,
        Stage::Augment,
        Stage::Fields,
        Stage::Lossless,
        Stage::TensorWindow,
        Stage::Bounded,
        Stage::EncodeQuantise,
        Stage::EncodeDifferences,
        Stage::EncodeHistogram,
        Stage::EncodePack,
        Stage::Blocks,
    ];

    /// A label for the stage: its files under `shaders/`.
    pub const fn label(self) -> &'static str {
        match self {
            Stage::PrefixSum => "prefix_sum.wgsl",
            Stage::Levels => "levels.wgsl",
            Stage::Augment => "augment.wgsl",
            Stage::Fields => "fields.wgsl",
            Stage::Lossless => "lossless.wgsl",
            Stage::TensorWindow => "tensor_window.wgsl",
            Stage::Bounded => "bounded.wgsl",
            Stage::EncodeQuantise => "encode_quantise.wgsl",
            Stage::EncodeDifferences => "encode_differences.wgsl",
            Stage::EncodeHistogram => "encode_histogram.wgsl",
            Stage::EncodePack => "encode_pack.wgsl",
            Stage::Blocks => "blocks.wgsl",
            Stage::Decode(LayoutKind::Interleaved) => "decode.wgsl + output/interleaved.wgsl",
            Stage::Decode(LayoutKind::F32Chw) => "decode.wgsl + output/f32_chw.wgsl",
        }
    }

    /// The `gpu::abi` structs the stage reads, whose WGSL [`source`] generates.
    pub fn structs(self) -> &'static [&'static WgslStruct] {
        match self {
            Stage::PrefixSum => &[&abi::ScanParams::WGSL_STRUCT],
            Stage::Decode(_) => &[&abi::ImageInfo::WGSL_STRUCT, &abi::Params::WGSL_STRUCT],
            Stage::Levels => &[&abi::LevelJob::WGSL_STRUCT],
            Stage::Augment => &[&abi::AugmentJob::WGSL_STRUCT],
            Stage::Fields => &[&abi::FieldJob::WGSL_STRUCT],
            Stage::Lossless => &[
                &abi::LosslessSegment::WGSL_STRUCT,
                &abi::LosslessArray::WGSL_STRUCT,
                &abi::LosslessStep::WGSL_STRUCT,
            ],
            Stage::TensorWindow => &[&abi::TensorWindowJob::WGSL_STRUCT],
            Stage::Bounded => &[
                &abi::LosslessSegment::WGSL_STRUCT,
                &abi::BoundedArray::WGSL_STRUCT,
                &abi::BoundedPass::WGSL_STRUCT,
                &abi::BoundedStep::WGSL_STRUCT,
            ],
            Stage::EncodeQuantise
            | Stage::EncodeDifferences
            | Stage::EncodeHistogram
            | Stage::EncodePack => &[
                &encode_abi::EncodeParams::WGSL_STRUCT,
                &encode_abi::EncodeSegment::WGSL_STRUCT,
            ],
            Stage::Blocks => &[&abi::BlocksParams::WGSL_STRUCT],
        }
    }
}

/// WGSL constants generated from the Rust definitions (the format module, the error flags,
/// the workgroup size), so the shaders cannot drift from the CPU decoder's values.
pub(crate) fn prelude() -> String {
    use crate::format;
    use crate::format::compact as cf;
    let consts: &[(&str, u32)] = &[
        ("NBIT_FIELD_BITS_8", format::fast::nbit_field_bits(8)),
        ("NBIT_FIELD_BITS_16", format::fast::nbit_field_bits(16)),
        (
            "PREDICTOR_MAX_ID",
            format::fast::FastPredictor::ALL[format::fast::FastPredictor::ALL.len() - 1] as u32,
        ),
        ("STREAM_PREFIX_LEN", format::fast::STREAM_PREFIX_LEN as u32),
        ("MAX_PATCH", 1 << format::PATCH_LOG2_MAX),
        ("WG", abi::DECODE_WORKGROUP_SIZE),
        ("ERR_PREDICTOR", abi::flags::PREDICTOR),
        ("ERR_BIT_WIDTH", abi::flags::BIT_WIDTH),
        ("ERR_OVERRUN", abi::flags::OVERRUN),
        ("ERR_TRAILING", abi::flags::TRAILING),
        ("ERR_RANGE", abi::flags::RANGE),
        ("ERR_TRANSFORM", abi::flags::TRANSFORM),
        ("ERR_CODE", abi::flags::CODE),
        ("ERR_SEGMENT_TABLE", abi::flags::SEGMENT_TABLE),
        ("ERR_SYMBOL", abi::flags::SYMBOL),
        ("ERR_SEGMENT", abi::flags::SEGMENT),
        ("ERR_PALETTE", abi::flags::PALETTE),
        ("ERR_MULT", abi::flags::MULT),
        ("ERR_VALUE", abi::flags::VALUE),
        ("MAX_CHANNELS", 4),
        ("TRANSFORM_BITS", cf::TRANSFORM_BITS),
        ("TRANSFORM_MAX_ID", cf::Transform::Palette as u32),
        ("TRANSFORM_PALETTE", cf::Transform::Palette as u32),
        ("PALETTE_COUNT_BITS", cf::PALETTE_COUNT_BITS),
        (
            "TRANSFORM_SUBTRACT_GREEN",
            cf::Transform::SubtractGreen as u32,
        ),
        ("COMPACT_PREDICTOR_BITS", cf::PREDICTOR_BITS),
        (
            "COMPACT_PREDICTOR_MAX_ID",
            cf::CompactPredictor::ALL[cf::CompactPredictor::ALL.len() - 1] as u32,
        ),
        ("PREDICTOR_NONE", cf::CompactPredictor::None as u32),
        ("PREDICTOR_UP", cf::CompactPredictor::Up as u32),
        ("PREDICTOR_GRADIENT", cf::CompactPredictor::Gradient as u32),
        ("PREDICTOR_LEFT", cf::CompactPredictor::Left as u32),
        (
            "PREDICTOR_HALF_GRADIENT",
            cf::CompactPredictor::HalfGradient as u32,
        ),
        ("PREDICTOR_UP_MEAN", cf::CompactPredictor::UpMean as u32),
        ("TOKEN_COUNT_BITS", cf::TOKEN_COUNT_BITS),
        ("CODE_LENGTH_BITS", cf::CODE_LENGTH_BITS),
        ("MAX_CODE_LEN", cf::MAX_CODE_LEN),
        ("MAX_TOKENS", cf::alphabet_size(16)),
        ("SEGMENT_WIDTH_BITS", cf::SEGMENT_WIDTH_BITS),
        ("SEGMENT_BASE_BITS", cf::SEGMENT_BASE_BITS),
        ("SEGMENT_WIDTH_MAX", cf::SEGMENT_WIDTH_MAX),
        ("SEGMENTS_MAX", cf::SEGMENTS_MAX),
        ("SEGMENT_ROW_SAMPLES_MAX", cf::SEGMENT_ROW_SAMPLES_MAX),
        ("TOKEN_DIRECT", cf::TOKEN_DIRECT),
        ("TOKEN_DIRECT_LOG2", cf::TOKEN_DIRECT_LOG2),
        ("TOKEN_MANTISSA_BITS", cf::TOKEN_MANTISSA_BITS),
        ("PAIR_LIMIT", cf::PAIR_LIMIT),
        ("RUN_TOKENS", cf::RUN_TOKENS),
        ("FAST_BITS", abi::FAST_BITS),
        ("LEVELS_WG", abi::LEVELS_WORKGROUP_SIZE),
        ("AUGMENT_WG", abi::AUGMENT_WORKGROUP_SIZE),
        ("FIELDS_WG", abi::FIELDS_WORKGROUP_SIZE),
        ("LOSSLESS_WG", abi::LOSSLESS_WORKGROUP_SIZE),
        ("TENSOR_WG", abi::TENSOR_WORKGROUP_SIZE),
        ("ELEMENT_F32", abi::element::F32),
        ("ELEMENT_F16", abi::element::F16),
        ("ELEMENT_BF16", abi::element::BF16),
        ("ELEMENT_U8", abi::element::U8),
        ("ELEMENT_I8", abi::element::I8),
        ("ELEMENT_U16", abi::element::U16),
        ("ELEMENT_I16", abi::element::I16),
        ("ELEMENT_U32", abi::element::U32),
        ("ELEMENT_I32", abi::element::I32),
        ("BOUNDED_WG", abi::BOUNDED_WORKGROUP_SIZE),
        ("LINE_BLOCK", abi::LINE_BLOCK),
        ("SEGMENT_ROUND", abi::SEGMENT_ROUND),
        ("BOUNDED_PAIR0", abi::BOUNDED_PAIR0),
        ("BOUNDED_RUN0", abi::BOUNDED_RUN0),
        ("BOUNDED_PAIR_LIMIT", abi::BOUNDED_PAIR_LIMIT),
        ("BOUNDED_MAX_BINS", abi::BOUNDED_MAX_BINS),
        ("PASS_ORIGIN", abi::PASS_ORIGIN),
        ("PASS_CUBIC", abi::PASS_CUBIC),
        ("RUN_WORDS", abi::FIELD_RUN_WORDS),
        ("BAND_H", crate::format::levels::BAND_H as u32),
        ("BAND_V", crate::format::levels::BAND_V as u32),
        ("BAND_D", crate::format::levels::BAND_D as u32),
        ("ENCODE_WG", encode_abi::ENCODE_WORKGROUP_SIZE),
        ("NO_BIN", encode_abi::NO_BIN),
        ("FILL_WORDS", encode_abi::FILL_WORDS),
        ("RANGE_ITEM", encode_abi::RANGE_ITEM),
        ("HIST_WORDS", encode_abi::HIST_WORDS),
        ("BOUNDED_ALPHABET", encode_abi::BOUNDED_ALPHABET),
        ("BOUNDED_RUN_MAX", encode_abi::BOUNDED_RUN_MAX),
        ("EST_ITEM", encode_abi::EST_ITEM),
        ("EST_TOKENS", encode_abi::EST_TOKENS),
        ("EST_WORDS", encode_abi::EST_WORDS),
        ("EST_SETS_WORDS", encode_abi::EST_SETS_WORDS),
        ("BLOCKS_WG", abi::BLOCKS_WORKGROUP_SIZE),
        ("BLOCKS_K_LIMIT", crate::format::blocks::K_LIMIT),
        ("BLOCKS_SYMBOLS", crate::format::blocks::SYMBOLS as u32),
        ("BLOCKS_ESCAPE", crate::format::blocks::ESCAPE),
        ("BLOCKS_MAX_CODE", crate::format::blocks::MAX_CODE),
        ("BLOCKS_BLOCK_COST", crate::format::blocks::BLOCK_COST),
        (
            "BLOCKS_MAX_BLOCK_BYTES",
            crate::format::blocks::MAX_BLOCK_BYTES,
        ),
        (
            "BLOCKS_HEAD_WORDS",
            crate::format::blocks::HEAD_WORDS as u32,
        ),
        ("BLOCKS_MAGIC", crate::format::blocks::BLOCKS_MAGIC),
    ];
    let mut out =
        String::from("// ---- generated from the Rust constants (gpu::shaders::prelude) ----\n");
    for &(name, value) in consts {
        out.push_str(&format!("const {name}: u32 = {value}u;\n"));
    }
    out
}

/// The final WGSL source of a stage: the generated constants and structs, the shared sources,
/// then (for the decode) the output layout's file and the entry points.
pub(crate) fn source(stage: Stage) -> String {
    let output = match stage {
        Stage::PrefixSum
        | Stage::Levels
        | Stage::Augment
        | Stage::Fields
        | Stage::Lossless
        | Stage::TensorWindow
        | Stage::Bounded
        | Stage::EncodeQuantise
        | Stage::EncodeDifferences
        | Stage::EncodeHistogram
        | Stage::EncodePack
        | Stage::Blocks => None,
        Stage::Decode(LayoutKind::Interleaved) => {
            Some(("output/interleaved.wgsl", OUTPUT_INTERLEAVED))
        }
        Stage::Decode(LayoutKind::F32Chw) => Some(("output/f32_chw.wgsl", OUTPUT_F32_CHW)),
    };
    let parts: Vec<(&str, &str)> = match output {
        None if stage == Stage::Levels => {
            vec![("shared/jobs.wgsl", JOBS), ("levels.wgsl", LEVELS)]
        }
        None if stage == Stage::Augment => vec![
            ("shared/jobs.wgsl", JOBS),
            ("shared/f16.wgsl", F16),
            ("augment.wgsl", AUGMENT),
        ],
        None if stage == Stage::Fields => {
            vec![("shared/jobs.wgsl", JOBS), ("fields.wgsl", FIELDS)]
        }
        None if stage == Stage::TensorWindow => vec![
            ("shared/jobs.wgsl", JOBS),
            ("shared/f16.wgsl", F16),
            ("tensor_window.wgsl", TENSOR_WINDOW),
        ],
        None if stage == Stage::Lossless => {
            vec![
                ("shared/bits.wgsl", BITS),
                ("shared/segments.wgsl", SEGMENTS),
                ("shared/line_sum.wgsl", LINE_SUM),
                ("shared/float_arrays.wgsl", FLOAT_ARRAYS),
                ("lossless.wgsl", LOSSLESS),
            ]
        }
        None if stage == Stage::Bounded => {
            vec![
                ("shared/bits.wgsl", BITS),
                ("shared/segments.wgsl", SEGMENTS),
                ("shared/line_sum.wgsl", LINE_SUM),
                ("shared/float_arrays.wgsl", FLOAT_ARRAYS),
                ("bounded.wgsl", BOUNDED),
            ]
        }
        None if stage == Stage::EncodeQuantise => vec![
            ("shared/encode_bindings.wgsl", ENCODE_BINDINGS),
            ("encode_quantise.wgsl", ENCODE_QUANTISE),
        ],
        None if stage == Stage::EncodeDifferences => vec![
            ("shared/encode_bindings.wgsl", ENCODE_BINDINGS),
            ("encode_differences.wgsl", ENCODE_DIFFERENCES),
        ],
        None if stage == Stage::EncodeHistogram => vec![
            ("shared/encode_bindings.wgsl", ENCODE_BINDINGS),
            ("shared/tokenize.wgsl", TOKENIZE),
            ("encode_histogram.wgsl", ENCODE_HISTOGRAM),
        ],
        None if stage == Stage::EncodePack => vec![
            ("shared/encode_bindings.wgsl", ENCODE_BINDINGS),
            ("shared/tokenize.wgsl", TOKENIZE),
            ("encode_pack.wgsl", ENCODE_PACK),
        ],
        None if stage == Stage::Blocks => vec![("blocks.wgsl", BLOCKS)],
        None => vec![("prefix_sum.wgsl", PREFIX_SUM)],
        Some(output) => vec![
            ("shared/images.wgsl", IMAGES),
            ("shared/bits.wgsl", BITS),
            ("shared/predict.wgsl", PREDICT),
            ("shared/decode_streams.wgsl", DECODE_STREAMS),
            ("shared/decode_compact.wgsl", DECODE_COMPACT),
            output,
            ("decode.wgsl", DECODE),
        ],
    };
    let mut out = prelude();
    out.push_str("// ---- generated from the Rust structs (gpu::abi) ----\n");
    for s in stage.structs() {
        out.push_str(&s.declaration());
        out.push('\n');
    }
    for (name, text) in parts {
        out.push_str("// ---- shaders/");
        out.push_str(name);
        out.push_str(" ----\n");
        out.push_str(text);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (stage, output layout) source parses and validates with naga: a broken shader
    /// fails here without a GPU.
    #[test]
    fn every_shader_validates_with_naga() {
        for stage in Stage::ALL {
            let src = source(stage);
            let module = naga::front::wgsl::parse_str(&src)
                .unwrap_or_else(|e| panic!("{}: {}", stage.label(), e.emit_to_string(&src)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::empty(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}: {}", stage.label(), e.emit_to_string(&src)));
        }
    }

    /// Every output layout kind has a decode stage in [`Stage::ALL`].
    #[test]
    fn every_layout_kind_is_validated() {
        for kind in LayoutKind::ALL {
            assert!(Stage::ALL.contains(&Stage::Decode(kind)));
        }
        let f32_chw = crate::layout::OutputLayout::F32Chw(crate::layout::Normalize::UNIT);
        assert_eq!(LayoutKind::of(f32_chw), LayoutKind::F32Chw);
        let interleaved = crate::layout::OutputLayout::Interleaved;
        assert_eq!(LayoutKind::of(interleaved), LayoutKind::Interleaved);
    }
}
