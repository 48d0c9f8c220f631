//! The CPU path to a normalised f32 CHW tensor, two ways on the same file, interleaved so that
//! machine drift hits both: (a) decode to interleaved pixels, then convert (what a data
//! pipeline did before `decode_into_f32_chw`), (b) `decode_into_f32_chw`, which normalises
//! inside the decoder's row loop. Prints the best of REPS for each, one thread and all threads:
//! `cargo run --release --example f32_tensor -- IMAGE [REPS]` (an .l3 file, or any image the
//! `image` crate reads, encoded first with the fast profile).
use std::time::Instant;

use l3::{DecodeOptions, Normalize};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: f32_tensor IMAGE [REPS]")?;
    let reps: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(10);
    let file = if path.ends_with(".l3") {
        std::fs::read(&path)?
    } else {
        let image = l3::read_image(path.as_ref())?;
        l3::encode_image(&image, &l3::EncodeOptions::for_profile(l3::Profile::Fast))?
    };
    let h = l3::read_header(&file)?;
    let norm = Normalize::IMAGENET;
    let (c, hw) = (h.channels() as usize, h.width as usize * h.height as usize);
    let mut pixels = vec![0u8; h.output_bytes() as usize];
    let mut two_pass = vec![0f32; hw * c];
    let mut one_pass = vec![0f32; hw * c];
    for parallel in [false, true] {
        let options = DecodeOptions {
            parallel,
            verify_checksum: false,
            ..Default::default()
        };
        let (mut best_a, mut best_b) = (f64::MAX, f64::MAX);
        for _ in 0..reps {
            let t = Instant::now();
            l3::decode_into(&file, &mut pixels, &options)?;
            if h.depth == 8 {
                for (p, px) in pixels.chunks_exact(c).enumerate() {
                    for (ch, &v) in px.iter().enumerate() {
                        two_pass[ch * hw + p] = norm.apply(v as u32, 8, ch);
                    }
                }
            } else {
                let s: &[u16] = bytemuck::cast_slice(&pixels);
                for (p, px) in s.chunks_exact(c).enumerate() {
                    for (ch, &v) in px.iter().enumerate() {
                        two_pass[ch * hw + p] = norm.apply(v as u32, 16, ch);
                    }
                }
            }
            best_a = best_a.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            l3::decode_into_f32_chw(&file, &mut one_pass, norm, &options)?;
            best_b = best_b.min(t.elapsed().as_secs_f64());
        }
        assert!(
            two_pass
                .iter()
                .zip(&one_pass)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "the two paths disagree"
        );
        let mp = hw as f64 / 1e6;
        println!(
            "{path} {}x{}x{c} {}-bit {:?}, {}: decode then convert {:.1} MP/s, decode_into_f32_chw {:.1} MP/s ({:.2}x)",
            h.width,
            h.height,
            h.depth,
            h.profile,
            if parallel { "all threads" } else { "1 thread" },
            mp / best_a,
            mp / best_b,
            best_a / best_b
        );
    }
    Ok(())
}
