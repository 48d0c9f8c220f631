//! WGSL sources of the GPU decoder. WGSL has no `#include`: each stage's final source is the
//! shared files it needs followed by the stage file, built by [`source`], the one function
//! both the pipelines and the naga validation test use.

const BITS: &str = include_str!("../../shaders/shared/bits.wgsl");
const PREDICT: &str = include_str!("../../shaders/shared/predict.wgsl");
const IMAGES: &str = include_str!("../../shaders/shared/images.wgsl");
const PREFIX_SUM: &str = include_str!("../../shaders/prefix_sum.wgsl");
const DECODE_STREAMS: &str = include_str!("../../shaders/shared/decode_streams.wgsl");
const DECODE_COMPACT: &str = include_str!("../../shaders/shared/decode_compact.wgsl");
const DECODE: &str = include_str!("../../shaders/decode.wgsl");
const DECODE_F32_CHW: &str = include_str!("../../shaders/decode_f32_chw.wgsl");

/// A pipeline stage, one WGSL file under `shaders/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// `prefix_sum.wgsl`: stream sizes to byte offsets (entry points `scan_blocks`, `add_sums`).
    PrefixSum,
    /// `decode.wgsl`: each sample ORed straight into its interleaved u8/u16 output word (no
    /// intermediate buffer, no store stage). Version-1 (patch, channel) streams: a workgroup
    /// of 64 invocations decodes 64 / patch size streams (one for 64- and 128-wide patches:
    /// [`crate::gpu::streams_per_workgroup`]); version-2 patch streams: one workgroup per
    /// patch (entry points `main` for version 1, `main_compact` for version 2).
    Decode,
    /// `decode_f32_chw.wgsl`: the same decode, writing normalised planar f32 straight into
    /// the output (entry points `main` and `main_compact`).
    DecodeF32Chw,
}

impl Stage {
    /// Every stage.
    pub const ALL: [Stage; 3] = [Stage::PrefixSum, Stage::Decode, Stage::DecodeF32Chw];

    /// The stage's file name under `shaders/`.
    pub const fn file_name(self) -> &'static str {
        match self {
            Stage::PrefixSum => "prefix_sum.wgsl",
            Stage::Decode => "decode.wgsl",
            Stage::DecodeF32Chw => "decode_f32_chw.wgsl",
        }
    }
}

/// WGSL constants generated from the Rust definitions (the format module, the error flags,
/// the workgroup size), so the shaders cannot drift from the CPU decoder's values.
pub fn prelude() -> String {
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
        ("WG", super::DECODE_WORKGROUP_SIZE),
        ("ERR_PREDICTOR", super::flags::PREDICTOR),
        ("ERR_BIT_WIDTH", super::flags::BIT_WIDTH),
        ("ERR_OVERRUN", super::flags::OVERRUN),
        ("ERR_TRAILING", super::flags::TRAILING),
        ("ERR_RANGE", super::flags::RANGE),
        ("ERR_TRANSFORM", super::flags::TRANSFORM),
        ("ERR_CODE", super::flags::CODE),
        ("ERR_SEGMENT_TABLE", super::flags::SEGMENT_TABLE),
        ("ERR_SYMBOL", super::flags::SYMBOL),
        ("ERR_SEGMENT", super::flags::SEGMENT),
        ("MAX_CHANNELS", 4),
        ("TRANSFORM_BITS", cf::TRANSFORM_BITS),
        ("TRANSFORM_MAX_ID", cf::Transform::SubtractGreen as u32),
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
        ("FAST_BITS", super::cpu_twin::FAST_BITS),
    ];
    let mut out =
        String::from("// ---- generated from the Rust constants (gpu::shaders::prelude) ----\n");
    for &(name, value) in consts {
        out.push_str(&format!("const {name}: u32 = {value}u;\n"));
    }
    out
}

/// The final WGSL source of a stage: the generated constants, shared sources, then the stage
/// source.
pub fn source(stage: Stage) -> String {
    let parts: &[(&str, &str)] = match stage {
        Stage::PrefixSum => &[("prefix_sum.wgsl", PREFIX_SUM)],
        Stage::Decode => &[
            ("shared/images.wgsl", IMAGES),
            ("shared/bits.wgsl", BITS),
            ("shared/predict.wgsl", PREDICT),
            ("shared/decode_streams.wgsl", DECODE_STREAMS),
            ("shared/decode_compact.wgsl", DECODE_COMPACT),
            ("decode.wgsl", DECODE),
        ],
        Stage::DecodeF32Chw => &[
            ("shared/images.wgsl", IMAGES),
            ("shared/bits.wgsl", BITS),
            ("shared/predict.wgsl", PREDICT),
            ("shared/decode_streams.wgsl", DECODE_STREAMS),
            ("shared/decode_compact.wgsl", DECODE_COMPACT),
            ("decode_f32_chw.wgsl", DECODE_F32_CHW),
        ],
    };
    let mut out = prelude();
    for (name, text) in parts {
        out.push_str("// ---- shaders/");
        out.push_str(name);
        out.push_str(" ----\n");
        out.push_str(text);
        out.push('\n');
    }
    out
}
