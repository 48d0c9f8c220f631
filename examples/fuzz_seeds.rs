//! Writes seed files for the `decode` fuzz target (`fuzz/`) into a folder:
//! `cargo run --release --example fuzz_seeds -- fuzz/corpus/decode`.
//!
//! Small generated images at the default 64-pixel patch size, in both profiles, each behind
//! the target's mode byte (CRC check, threading, the f32 layout, a window decode). They hold
//! whole 64x64 patches, which the fast decoder decodes with their own copy of the code (the
//! size a constant), next to edge patches, at both depths and with one, three and four
//! channels; rows mix gradients, smooth ramps (narrow rows), flat bands (flat rows) and
//! noise (full-width rows); and label maps (flat regions with straight and curved edges) of
//! one and two channels, which the compact profile codes with run tokens and palettes, and
//! whose run rows its decoder takes two at a time. The PNG-suite seeds of `fuzz/README.md`
//! (32x32, 8-pixel patches) have no whole 64x64 patch.
use l3::{ColorType, EncodeOptions, Profile, ProfileOptions, RawImage, Samples};

/// Sample `c` of pixel (`x`, `y`) in an image `h` rows high with samples up to `max`.
fn sample(x: u32, y: u32, c: u32, h: u32, max: u32, noise: &mut u32) -> u32 {
    *noise = noise.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
    let v = if y < h / 4 {
        x * 3 + c * 40
    } else if y < h / 2 {
        (x + y) / 3 + (x * y) % 3 + c
    } else if y < 3 * h / 4 {
        c * 50 + (y / 8) * 20
    } else if (x + y).is_multiple_of(7) {
        *noise >> 8
    } else {
        x * y
    };
    v % (max + 1)
}

/// Sample `c` of pixel (`x`, `y`) of a label map: a disc, a diagonal band and the rest, each
/// one value per channel.
fn label(x: u32, y: u32, c: u32, max: u32) -> u32 {
    let (dx, dy) = (x as i64 - 40, y as i64 - 30);
    let region = if dx * dx + dy * dy < 500 {
        1
    } else if x > 2 * y {
        2
    } else {
        0
    };
    (region * 70 + c * 20) * (max / 255) % (max + 1)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: fuzz_seeds OUTPUT_DIR")?;
    std::fs::create_dir_all(&dir)?;
    // (width, height, colour, depth, label map)
    let shapes = [
        (64, 64, ColorType::Rgb, 8, false),
        (128, 64, ColorType::Rgb, 8, false),
        (70, 130, ColorType::Rgb, 8, false),
        (96, 64, ColorType::Rgba, 8, false),
        (64, 64, ColorType::Gray, 8, false),
        (64, 128, ColorType::Gray, 16, false),
        (128, 64, ColorType::Gray, 8, true),
        (67, 65, ColorType::GrayAlpha, 8, true),
        (64, 64, ColorType::Gray, 16, true),
    ];
    let mut written = 0;
    for (width, height, color, depth, labels) in shapes {
        let channels = color.channels() as u32;
        let max = (1u32 << depth) - 1;
        let mut noise = 7;
        let values: Vec<u32> = (0..height)
            .flat_map(|y| (0..width).flat_map(move |x| (0..channels).map(move |c| (x, y, c))))
            .map(|(x, y, c)| {
                if labels {
                    label(x, y, c, max)
                } else {
                    sample(x, y, c, height, max, &mut noise)
                }
            })
            .collect();
        let bytes: Vec<u8> = values.iter().map(|&v| v as u8).collect();
        let words: Vec<u16> = values.iter().map(|&v| v as u16).collect();
        let image = RawImage {
            width,
            height,
            color,
            samples: if depth == 8 {
                Samples::U8(&bytes)
            } else {
                Samples::U16(&words)
            },
        };
        for profile in [Profile::Fast, Profile::Compact] {
            let options = EncodeOptions {
                profile: ProfileOptions::default_for(profile),
                ..Default::default()
            };
            let file = l3::encode::encode(&image, &options)?;
            // Mode bits (fuzz_targets/decode.rs): 1 CRC, 2 threads, 4 f32 layout, 8 window.
            for mode in [0x00u8, 0x06, 0x0d] {
                let kind = if labels { "-labels" } else { "" };
                let name = format!(
                    "{dir}/seed-{width}x{height}-{color:?}{depth}{kind}-{profile:?}-m{mode:02x}.l3"
                );
                let mut seed = vec![mode];
                seed.extend_from_slice(&file);
                std::fs::write(name, seed)?;
                written += 1;
            }
        }
    }
    println!("wrote {written} seeds to {dir}");
    Ok(())
}
