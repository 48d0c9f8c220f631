//! `l3`: convert images and whole dataset trees to L3, decode, inspect, verify.
//!
//! Exit status: 0 when every file succeeded, 1 when any file failed (each failure is reported
//! on stderr as `error: PATH: REASON`), 2 for a usage error.
//!
//! This file is the command line's top level and its dispatch; each command is a file of
//! `cmd/`. Below them: `flags` (shared flag values), `limits` (the limits and the reads they
//! bound), `fsio` (input trees, output paths, atomic writes), `resume` (resume records),
//! `images` (source images), `shards` (opening a dataset's shards), `inputs` (parsers of
//! `.npy`, `.f32` sidecars and label files), `display` (progress bar, byte counts).

mod cmd;
mod display;
mod flags;
mod fsio;
mod images;
mod inputs;
mod limits;
mod resume;
mod shards;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cmd::{
    bench_loader, cp, decode, demo, encode, field, info, ls, pack, unpack, verify, verify_dataset,
};

#[derive(Parser)]
#[command(
    name = "l3",
    version,
    about = "Images and float arrays for training: a codec decoded on any GPU, record shards, a planned loader"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Largest decoded image accepted, in bytes (also the limit for reading source images).
    #[arg(long, global = true, default_value_t = l3::Limits::default().max_output_bytes)]
    max_output_bytes: u64,
    /// Largest .l3 file accepted, in bytes.
    #[arg(long, global = true, default_value_t = l3::Limits::default().max_input_bytes)]
    max_input_bytes: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Convert images (files or whole directory trees) to L3.
    Encode(encode::EncodeArgs),
    /// Decode L3 files to PNG or PNM.
    Decode(decode::DecodeArgs),
    /// Show a file's header, patch table statistics and bits per pixel.
    Info(info::InfoArgs),
    /// Fully decode L3 files (checksum and every stream); optionally compare with originals.
    Verify(verify::VerifyArgs),
    /// Encode and decode the bundled sample images, printing sizes and speed.
    Demo(demo::DemoArgs),
    /// Pack an image tree into record shards with an index and a manifest (a dataset).
    Pack(pack::PackArgs),
    /// List a dataset: records, shards, bytes per level, classes.
    Ls(ls::LsArgs),
    /// Unpack a dataset back to PNG files (the original pixels).
    Unpack(unpack::UnpackArgs),
    /// Check a dataset: every shard against the manifest, every record decoded.
    VerifyDataset(verify_dataset::DatasetArgs),
    /// Copy a dataset between folders and object stores (s3://, gs://, az://, https://).
    Cp(cp::CpArgs),
    /// Run the training loader (CPU path) over a dataset: images/s, stage split, cache.
    BenchLoader(bench_loader::BenchLoaderArgs),
    /// Encode a float32 array (.f32 + .json sidecar, or .npy) within an error bound (.l3f).
    EncodeField(field::EncodeFieldArgs),
    /// Decode a float32 field file (.l3f) to .npy or .f32 (+ .json).
    DecodeField(field::DecodeFieldArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    limits::set(l3::Limits {
        max_output_bytes: cli.max_output_bytes,
        max_input_bytes: cli.max_input_bytes,
        ..Default::default()
    });
    let result = match cli.command {
        Command::Encode(a) => encode::cmd_encode(a),
        Command::Decode(a) => decode::cmd_decode(a),
        Command::Info(a) => info::cmd_info(a),
        Command::Verify(a) => verify::cmd_verify(a),
        Command::Demo(a) => demo::cmd_demo(a),
        Command::Pack(a) => pack::cmd_pack(a),
        Command::Ls(a) => ls::cmd_ls(a),
        Command::Unpack(a) => unpack::cmd_unpack(a),
        Command::VerifyDataset(a) => verify_dataset::cmd_verify_dataset(a),
        Command::Cp(a) => cp::cmd_cp(a),
        Command::BenchLoader(a) => bench_loader::cmd_bench_loader(a),
        Command::EncodeField(a) => field::cmd_encode_field(a),
        Command::DecodeField(a) => field::cmd_decode_field(a),
    };
    let result = result.map(|failed| failed + fsio::unlistable_dirs());
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!("{failed} failure(s)");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
