//! Prints the static kernel budget (issue 45): for every entry point of every WGSL stage, its
//! workgroup size and memory, the storage bindings it reads and writes, and the static sites
//! of atomics, barriers, loops and storage stores, read from the shaders with naga (no GPU).
//!
//!     cargo run --release --example kernel_budget
fn main() {
    print!(
        "{}",
        l3::gpu::budget::markdown(&l3::gpu::budget::static_budget())
    );
}
