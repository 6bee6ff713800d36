//! The kernel matrix's pure parts (`tests/kernels/`: its cases and their checks, the
//! initramfs's format, the kernel image's payload, the kernels' known limits), tested here
//! with the rest; the matrix itself boots kernels and runs on demand (`cargo test --test
//! kernels`).

#[allow(dead_code)]
#[path = "../kernels/cases.rs"]
mod cases;
#[allow(dead_code)]
#[path = "../kernels/cpio.rs"]
mod cpio;
#[allow(dead_code)]
#[path = "../kernels/expect.rs"]
mod expect;
#[allow(dead_code)]
#[path = "../kernels/fetch.rs"]
mod fetch;

use cases::*;

const MIB: u64 = 1 << 20;

fn labelled(bytes: u64, admits: (u64, u64)) -> Labelled {
    Labelled {
        bytes,
        admits,
        kind: String::new(),
        label: String::new(),
    }
}

#[test]
fn a_label_holds_when_what_it_admits_meets_the_truth() {
    let truth = (512 * MIB, 514 * MIB);
    // The report: 4 MB "exact" for a program that touched 512 MiB.
    assert!(!admits_truth(
        &labelled(4_068_352, (4_068_352, 4_068_352)),
        truth
    ));
    assert!(admits_truth(
        &labelled(513 * MIB, (513 * MIB, 513 * MIB)),
        truth
    ));
    // An upper bound from far above that reaches down into the truth.
    assert!(admits_truth(
        &labelled(600 * MIB, (500 * MIB, 600 * MIB)),
        truth
    ));
    // A sampled peak below the truth is a lower bound, and true; above it, false.
    assert!(admits_truth(
        &labelled(100 * MIB, (100 * MIB, u64::MAX)),
        truth
    ));
    assert!(!admits_truth(
        &labelled(600 * MIB, (600 * MIB, u64::MAX)),
        truth
    ));
}

fn observed(case: &Case, tracker: Tracker, run: Summary) -> Observed {
    Observed {
        case: case.name.into(),
        tracker,
        who: Who::Root,
        status: case.status,
        ms: 1,
        error: None,
        json_left: true,
        stdout: None,
        run: Some(run),
    }
}

/// The summary of a run of one process that started and exited 0 under `tracker`.
fn one_process(tracker: &str) -> Summary {
    Summary {
        tracker: tracker.into(),
        code: Some(0),
        processes: 1,
        threads: 1,
        execs: 1,
        ..Summary::default()
    }
}

/// The names of the checks of `case` that `o` fails.
fn failed(case: &Case, o: &Observed) -> Vec<String> {
    checks(case, o)
        .into_iter()
        .filter(|c| !c.ok)
        .map(|c| c.name)
        .collect()
}

#[test]
fn the_fill_fails_on_an_exact_figure_below_what_it_touched() {
    let fill = cases(Tracker::Ebpf, Who::Root)
        .into_iter()
        .find(|c| c.name == "fill")
        .unwrap();
    let run = Summary {
        max_pss: Some(labelled(4_068_352, (4_068_352, 4_068_352))),
        ..one_process("ebpf")
    };
    let o = observed(&fill, Tracker::Ebpf, run);
    assert_eq!(failed(&fill, &o), ["max_pss"]);
}

#[test]
fn a_started_run_that_warns_fails_its_warning_check() {
    let t = cases(Tracker::Ebpf, Who::Root).remove(0);
    let mut o = observed(&t, Tracker::Ebpf, one_process("ebpf"));
    assert!(failed(&t, &o).is_empty(), "{:?}", failed(&t, &o));
    // What 5.10 printed while the ebpf reader could not switch its batching flag.
    o.error = Some("ste: cannot tell the BPF programs whether the reader batches (Operation not permitted (os error 1)): EXEC lines may come up to 100 ms late".into());
    assert_eq!(failed(&t, &o), ["warning"]);
}

#[test]
fn a_failed_start_that_leaves_its_json_file_fails() {
    let t = cases(Tracker::Ebpf, Who::Nobody).remove(0);
    let mut o = observed(&t, Tracker::Ebpf, Summary::default());
    o.run = None;
    assert_eq!(failed(&t, &o), ["no file left"]);
    o.json_left = false;
    assert!(failed(&t, &o).is_empty());
}

#[test]
fn every_row_runs_the_cases_it_can_and_the_loop_counts_201() {
    let names = |t, w| -> Vec<&str> { cases(t, w).iter().map(|c| c.name).collect() };
    assert_eq!(names(Tracker::Ebpf, Who::Nobody), ["refused"]);
    assert_eq!(names(Tracker::Auto, Who::Nobody), ["true"]);
    assert!(names(Tracker::Ebpf, Who::Root).contains(&"getppid"));
    assert!(!names(Tracker::Netlink, Who::Root).contains(&"getppid"));
    let l = cases(Tracker::Ptrace, Who::Nobody)
        .into_iter()
        .find(|c| c.name == "loop")
        .unwrap();
    assert_eq!(l.counts, (201, 201, 201));
    assert_eq!(&l.args[..3], ["--tracker", "ptrace", "--"]);
}

#[test]
fn a_kernel_limit_names_its_releases() {
    assert_eq!(expect::version("5.10.0-46-amd64"), (5, 10));
    assert_eq!(expect::version("6.12.95+deb12-amd64"), (6, 12));
    assert!(
        expect::limit(
            "6.1.0-56-amd64",
            Tracker::Netlink,
            Who::Nobody,
            "true",
            "start"
        )
        .is_some()
    );
    assert!(
        expect::limit(
            "6.12.95+deb12-amd64",
            Tracker::Netlink,
            Who::Nobody,
            "true",
            "start"
        )
        .is_none()
    );
}

#[test]
fn an_initramfs_entry_is_a_header_a_name_and_data_each_padded_to_four_bytes() {
    let mut a = cpio::Archive::default();
    a.file("/init", 0o755, b"abc");
    let out = a.finish();
    assert_eq!(&out[..6], b"070701");
    // mode, then the file size, then the name's size (with its NUL).
    assert_eq!(&out[14..22], format!("{:08x}", 0o100755).as_bytes());
    assert_eq!(&out[54..62], b"00000003");
    assert_eq!(&out[94..102], b"00000005");
    assert_eq!(&out[110..115], b"init\0");
    // 110 + 5 = 115, padded to 116; then "abc", padded to 120.
    assert_eq!(&out[116..120], b"abc\0");
    assert_eq!(&out[120..126], b"070701");
    assert!(out.len().is_multiple_of(4));
}

#[test]
fn a_bzimage_payload_is_found_by_its_header_without_the_appended_size() {
    // One setup sector besides the boot sector: the kernel's code starts at 1024.
    let mut bz = vec![0u8; 4096];
    bz[0x1f1] = 1;
    bz[0x202..0x206].copy_from_slice(b"HdrS");
    let (off, len) = (100u32, 10u32);
    bz[0x248..0x24c].copy_from_slice(&off.to_le_bytes());
    bz[0x24c..0x250].copy_from_slice(&len.to_le_bytes());
    bz[1124..1130].copy_from_slice(b"\xfd7zXZ\0");
    let (data, tool) = fetch::payload(&bz).unwrap();
    assert_eq!((data.len(), tool), (6, "xz"));
    assert_eq!(data, b"\xfd7zXZ\0");
    bz[1124..1126].copy_from_slice(b"\x1f\x8b");
    let (data, tool) = fetch::payload(&bz).unwrap();
    assert_eq!(
        (data.len(), tool),
        (10, "gzip"),
        "gzip carries its own size"
    );
    bz[0x202] = 0;
    assert!(fetch::payload(&bz).is_err());
}
