//! WGSL sources of the GPU decoder. WGSL has no `#include`: each stage's final source is the
//! shared files it needs followed by the stage file, built by [`source`], the one function
//! both the pipelines and the naga validation test use.

const BITS: &str = include_str!("../../shaders/shared/bits.wgsl");
const PREDICT: &str = include_str!("../../shaders/shared/predict.wgsl");
const IMAGES: &str = include_str!("../../shaders/shared/images.wgsl");
const PREFIX_SUM: &str = include_str!("../../shaders/prefix_sum.wgsl");
const DECODE_STREAMS: &str = include_str!("../../shaders/shared/decode_streams.wgsl");
const DECODE: &str = include_str!("../../shaders/decode.wgsl");
const DECODE_F32_CHW: &str = include_str!("../../shaders/decode_f32_chw.wgsl");

/// A pipeline stage, one WGSL file under `shaders/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// `prefix_sum.wgsl`: stream sizes to byte offsets (entry points `scan_blocks`, `add_sums`).
    PrefixSum,
    /// `decode.wgsl`: (patch, channel) streams, each sample ORed straight into its
    /// interleaved u8/u16 output word (no intermediate buffer, no store stage); a workgroup
    /// of 64 invocations decodes 64 / patch size streams (one for 64- and 128-wide patches:
    /// [`crate::gpu::streams_per_workgroup`]) (entry point `main`).
    Decode,
    /// `decode_f32_chw.wgsl`: the same decode, writing normalised planar f32 straight into
    /// the output (entry point `main`).
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
    let consts: [(&str, u32); 11] = [
        ("NBIT_FIELD_BITS_8", format::nbit_field_bits(8)),
        ("NBIT_FIELD_BITS_16", format::nbit_field_bits(16)),
        (
            "PREDICTOR_MAX_ID",
            format::Predictor::ALL[format::Predictor::ALL.len() - 1] as u32,
        ),
        ("STREAM_PREFIX_LEN", format::STREAM_PREFIX_LEN as u32),
        ("MAX_PATCH", 1 << format::PATCH_LOG2_MAX),
        ("WG", super::DECODE_WORKGROUP_SIZE),
        ("ERR_PREDICTOR", super::flags::PREDICTOR),
        ("ERR_BIT_WIDTH", super::flags::BIT_WIDTH),
        ("ERR_OVERRUN", super::flags::OVERRUN),
        ("ERR_TRAILING", super::flags::TRAILING),
        ("ERR_RANGE", super::flags::RANGE),
    ];
    let mut out =
        String::from("// ---- generated from the Rust constants (gpu::shaders::prelude) ----\n");
    for (name, value) in consts {
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
            ("decode.wgsl", DECODE),
        ],
        Stage::DecodeF32Chw => &[
            ("shared/images.wgsl", IMAGES),
            ("shared/bits.wgsl", BITS),
            ("shared/predict.wgsl", PREDICT),
            ("shared/decode_streams.wgsl", DECODE_STREAMS),
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
