//! The static part of the kernel budget (issue 45): for every entry point of every WGSL stage,
//! what can be read from the shader itself, with no GPU: its workgroup size and workgroup
//! memory (the occupancy limits), the storage bindings it reads and writes, and the static
//! sites of the operations a fast kernel keeps few of: read-modify-write atomics,
//! workgroup barriers, loops and storage stores. A site is counted once per function reachable
//! from the entry point (a function called from two places counts once), so the figures say
//! what a kernel's code does, not how often it runs. `examples/kernel_budget.rs` prints the
//! table; BENCHMARKS.md keeps it.

use std::collections::BTreeSet;

use wgpu::naga::valid::GlobalUse;
use wgpu::naga::{self, AddressSpace, Block, Handle, Module, Statement};

use super::shaders::{source, Stage};

/// What the WGSL of one entry point says about its cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryBudget {
    /// The stage's files (`shaders/...`).
    pub stage: &'static str,
    /// The entry point.
    pub entry: String,
    /// Invocations per workgroup (x * y * z).
    pub workgroup_size: u32,
    /// Bytes of workgroup memory the entry point uses.
    pub workgroup_bytes: u32,
    /// Storage bindings it only reads.
    pub storage_read: u32,
    /// Storage bindings it writes (stores or atomics).
    pub storage_write: u32,
    /// Static sites of read-modify-write atomics (`atomicAdd`, `atomicOr`, ...).
    pub atomics: u32,
    /// Static sites of workgroup barriers (`workgroupBarrier`, `storageBarrier`,
    /// `workgroupUniformLoad`).
    pub barriers: u32,
    /// Static loops.
    pub loops: u32,
    /// Static stores through a pointer into storage (writes of global memory).
    pub storage_stores: u32,
}

/// The budget of every entry point of every stage, in [`Stage::ALL`] order.
pub fn static_budget() -> Vec<EntryBudget> {
    let mut out = Vec::new();
    for stage in Stage::ALL {
        let src = source(stage);
        let module = naga::front::wgsl::parse_str(&src)
            .unwrap_or_else(|e| panic!("{}: {}", stage.label(), e.emit_to_string(&src)));
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}: {}", stage.label(), e.emit_to_string(&src)));
        for (i, ep) in module.entry_points.iter().enumerate() {
            let uses = info.get_entry_point(i);
            let mut b = EntryBudget {
                stage: stage.label(),
                entry: ep.name.clone(),
                workgroup_size: ep.workgroup_size.iter().product(),
                workgroup_bytes: 0,
                storage_read: 0,
                storage_write: 0,
                atomics: 0,
                barriers: 0,
                loops: 0,
                storage_stores: 0,
            };
            for (h, g) in module.global_variables.iter() {
                if uses[h].is_empty() {
                    continue;
                }
                match g.space {
                    AddressSpace::WorkGroup => {
                        b.workgroup_bytes += module.types[g.ty].inner.size(module.to_ctx());
                    }
                    AddressSpace::Storage { .. } if uses[h].contains(GlobalUse::WRITE) => {
                        b.storage_write += 1
                    }
                    AddressSpace::Storage { .. } => b.storage_read += 1,
                    _ => {}
                }
            }
            let mut seen = BTreeSet::new();
            count(&module, &ep.function, &ep.function.body, &mut b, &mut seen);
            out.push(b);
        }
    }
    out
}

/// Adds the sites of `block` (of `function`) and of the functions it calls (each once).
fn count(
    module: &Module,
    function: &naga::Function,
    block: &Block,
    b: &mut EntryBudget,
    seen: &mut BTreeSet<Handle<naga::Function>>,
) {
    for s in block.iter() {
        match s {
            Statement::Block(inner) => count(module, function, inner, b, seen),
            Statement::If { accept, reject, .. } => {
                count(module, function, accept, b, seen);
                count(module, function, reject, b, seen);
            }
            Statement::Switch { cases, .. } => {
                for c in cases {
                    count(module, function, &c.body, b, seen);
                }
            }
            Statement::Loop {
                body, continuing, ..
            } => {
                b.loops += 1;
                count(module, function, body, b, seen);
                count(module, function, continuing, b, seen);
            }
            Statement::Atomic { .. } => b.atomics += 1,
            Statement::ControlBarrier(_) | Statement::WorkGroupUniformLoad { .. } => {
                b.barriers += 1
            }
            Statement::Store { pointer, .. } if points_into_storage(module, function, *pointer) => {
                b.storage_stores += 1;
            }
            Statement::Call { function: f, .. } if seen.insert(*f) => {
                let callee = &module.functions[*f];
                count(module, callee, &callee.body, b, seen);
            }
            _ => {}
        }
    }
}

/// Whether `pointer` (an expression of `function`) is into a storage global.
fn points_into_storage(
    module: &Module,
    function: &naga::Function,
    pointer: Handle<naga::Expression>,
) -> bool {
    use naga::Expression as E;
    let mut e = pointer;
    loop {
        match function.expressions[e] {
            E::Access { base, .. } | E::AccessIndex { base, .. } => e = base,
            E::GlobalVariable(g) => {
                return matches!(
                    module.global_variables[g].space,
                    AddressSpace::Storage { .. }
                )
            }
            _ => return false,
        }
    }
}

/// The budget as a Markdown table.
pub fn markdown(rows: &[EntryBudget]) -> String {
    let mut s = String::from(
        "| stage | entry point | wg size | wg memory (B) | storage r / w | atomic sites | \
         barrier sites | loops | storage stores |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} / {} | {} | {} | {} | {} |\n",
            r.stage,
            r.entry,
            r.workgroup_size,
            r.workgroup_bytes,
            r.storage_read,
            r.storage_write,
            r.atomics,
            r.barriers,
            r.loops,
            r.storage_stores
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_point_has_a_budget_that_matches_what_its_source_says() {
        let rows = static_budget();
        // Every stage has at least one entry point, every entry point at least one invocation.
        for stage in Stage::ALL {
            assert!(
                rows.iter().any(|r| r.stage == stage.label()),
                "{}",
                stage.label()
            );
        }
        assert!(rows.iter().all(|r| r.workgroup_size >= 1));
        let find = |stage: &str, entry: &str| {
            rows.iter()
                .find(|r| r.stage == stage && r.entry == entry)
                .unwrap_or_else(|| panic!("{stage} {entry}"))
                .clone()
        };
        // The image decode writes its output with atomicOr (issue 45's first suspect), and
        // the prefix sum synchronises its workgroup.
        let decode = find(
            Stage::Decode(super::super::abi::LayoutKind::Interleaved).label(),
            "main",
        );
        assert!(decode.atomics > 0, "{decode:?}");
        assert_eq!(
            decode.workgroup_size,
            super::super::abi::DECODE_WORKGROUP_SIZE
        );
        let scan = find("prefix_sum.wgsl", "scan_blocks");
        assert!(scan.barriers > 0 && scan.workgroup_bytes > 0, "{scan:?}");
        // A kernel that writes a buffer has a store into storage.
        let augment = find("augment.wgsl", "augment");
        assert!(
            augment.storage_write >= 1 && augment.storage_stores >= 1,
            "{augment:?}"
        );
        let table = markdown(&rows);
        assert_eq!(table.lines().count(), rows.len() + 2);
    }
}
