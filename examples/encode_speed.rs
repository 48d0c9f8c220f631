//! Encodes one image repeatedly on one thread in both profiles and prints the throughput:
//! `cargo run --release --example encode_speed -- IMAGE [REPS]`.
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: encode_speed IMAGE [REPS]")?;
    let reps: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(5);
    let image = l3::read_image(path.as_ref())?;
    let mpix = image.width() as f64 * image.height() as f64 / 1e6;
    for profile in [l3::Profile::Fast, l3::Profile::Compact] {
        let options = l3::EncodeOptions {
            profile: l3::ProfileOptions::default_for(profile),
            parallel: false,
            ..Default::default()
        };
        let mut best = f64::MAX;
        let mut bytes = 0;
        for _ in 0..reps {
            let t = Instant::now();
            bytes = l3::encode_image(&image, &options)?.len();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{path} {}: {:.1} MP/s on 1 thread, {bytes} bytes",
            profile.name(),
            mpix / best
        );
    }
    Ok(())
}
