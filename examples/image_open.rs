//! Reads an L3 file with the `image` crate, like any PNG: one registration call, then
//! `image::open`. Usage: `cargo run --release --example image_open -- FILE.l3 [OUT.png]`.

fn main() -> anyhow::Result<()> {
    // Once at start-up: `.l3` files (and files with the L3 signature) now open through `image`.
    l3::register_image_hooks();
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: image_open FILE.l3 [OUT.png]"))?;
    let img = image::open(&path)?;
    println!("{path}: {}x{} {:?}", img.width(), img.height(), img.color());
    if let Some(out) = args.next() {
        img.save(&out)?;
        println!("wrote {out}");
    }
    Ok(())
}
