//! The command line's unit tests.

#[test]
fn a_syscalls_mode_spells_its_value_as_the_cli_does() {
    // `ste bench` passes the mode on to the runs it starts.
    for a in [
        SyscallsArg::Count,
        SyscallsArg::Time,
        SyscallsArg::PerProcess,
    ] {
        let name = a.to_possible_value().unwrap().get_name().to_string();
        assert_eq!(crate::source::syscalls::Mode::from(a).flag_value(), name);
    }
}

use super::*;

fn words(line: &[&str]) -> Vec<OsString> {
    line.iter().map(OsString::from).collect()
}

/// The run's parser alone and the whole one read every option of the run alike (each
/// with a value where it takes one); lines that only the whole parser can read go to it.
#[test]
fn the_run_alone_reads_a_run_as_the_whole_parser() {
    let run = RunArgs::augment_args(clap::Command::new("ste"));
    let mut lines: Vec<Vec<String>> = [
        &["ste", "true"][..],
        &["ste", "-q", "-o", "/dev/null", "ls", "-l", "--color"],
        &["ste", "--", "record", "-o", "f"],
        &["ste", "--tracker", "ptrace", "--", "--weird"],
    ]
    .iter()
    .map(|l| l.iter().map(|w| w.to_string()).collect())
    .collect();
    for a in run.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        let mut line = vec!["ste".to_string(), format!("--{long}")];
        if a.get_action().takes_values() {
            let value = a
                .get_possible_values()
                .first()
                .map(|v| v.get_name().to_string());
            line.push(value.unwrap_or_else(|| "1".into()));
        }
        line.push("true".into());
        lines.push(line);
    }
    let mut alone = 0;
    for line in &lines {
        let whole = Cli::try_parse_from(line);
        let line: Vec<OsString> = line.iter().map(OsString::from).collect();
        if let Some(run) = Cli::run_alone(&line) {
            alone += 1;
            let whole = whole.unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert!(whole.subcommand.is_none(), "{line:?}");
            assert_eq!(format!("{run:?}"), format!("{:?}", whole.run), "{line:?}");
        }
    }
    assert!(alone > lines.len() / 2, "{alone} of {} lines", lines.len());
    for line in [
        &["ste", "record", "-o", "f", "true"][..],
        &["ste", "help"],
        &["ste", "--help"],
        &["ste", "--version"],
        &["ste", "--no-such-option", "true"],
        &["ste", "-q"],
    ] {
        assert!(Cli::run_alone(&words(line)).is_none(), "{line:?}");
    }
}

#[test]
fn parses_a_command_with_its_own_flags() {
    let cli = Cli::try_parse_from(["ste", "--tracker", "netlink", "ls", "-l", "--color"]).unwrap();
    assert_eq!(cli.run.command, ["ls", "-l", "--color"]);
    assert_eq!(cli.run.tracking.tracker, Some(TrackerArg::Netlink));
    let cli = Cli::try_parse_from(["ste", "--", "--weird"]).unwrap();
    assert_eq!(cli.run.command, ["--weird"]);
}

#[test]
fn subcommands_and_commands_named_like_them() {
    let cli = Cli::try_parse_from(["ste", "run", "--linger", "1s", "ls"]).unwrap();
    assert!(matches!(cli.subcommand, Some(Subcommand::Run(ref r)) if r.command == ["ls"]));
    let cli = Cli::try_parse_from(["ste", "--", "run"]).unwrap();
    assert!(cli.subcommand.is_none());
    assert_eq!(cli.run.command, ["run"]);
}

#[test]
fn unknown_options_before_the_command_are_errors() {
    use clap::error::ErrorKind;
    let kind = |args: &[&str]| Cli::parse_args(args).unwrap_err().kind();
    assert_eq!(
        kind(&["ste", "--bogus", "true"]),
        ErrorKind::UnknownArgument
    );
    assert_eq!(kind(&["ste", "-x", "true"]), ErrorKind::UnknownArgument);
    assert_eq!(
        kind(&["ste", "run", "--bogus", "true"]),
        ErrorKind::UnknownArgument
    );
    let record = ["ste", "record", "-o", "r.ste", "--bogus", "true"];
    assert_eq!(kind(&record), ErrorKind::UnknownArgument);
    // After `--`, or once the command started, a word is the command's.
    let cli = Cli::parse_args(["ste", "--", "--bogus", "x"]).unwrap();
    assert_eq!(cli.run.command, ["--bogus", "x"]);
    let cli = Cli::parse_args(["ste", "run", "true", "--bogus"]).unwrap();
    assert!(
        matches!(cli.subcommand, Some(Subcommand::Run(ref r)) if r.command == ["true", "--bogus"])
    );
    let cli = Cli::parse_args(["ste", "sh", "-c", "x", "--", "--", "y"]).unwrap();
    assert_eq!(cli.run.command, ["sh", "-c", "x", "--", "--", "y"]);
}

#[test]
fn a_subcommand_after_options_is_an_error_never_a_program() {
    let err =
        Cli::parse_args(["ste", "--tracker", "ptrace", "record", "-o", "f", "true"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
    assert!(err.to_string().contains("-- record ...'"), "{err}");
    for name in ["run", "monitor", "report", "maps", "help"] {
        assert!(Cli::parse_args(["ste", "--tree", name]).is_err(), "{name}");
        // Without options, or after `--`, it is clear.
        let cli = Cli::parse_args(["ste", "--tree", "--", name]).unwrap();
        assert_eq!(cli.run.command, [name]);
    }
    let cli = Cli::parse_args(["ste", "--", "record", "-o"]).unwrap();
    assert_eq!(cli.run.command, ["record", "-o"]);
    // A program that merely takes such a word is unaffected.
    let cli = Cli::parse_args(["ste", "--tree", "git", "maps"]).unwrap();
    assert_eq!(cli.run.command, ["git", "maps"]);
}

#[test]
fn record_takes_every_run_option_and_o_for_the_record() {
    let cli = Cli::try_parse_from([
        "ste",
        "record",
        "-o",
        "run.ste",
        "--html",
        "r.html",
        "--report-file",
        "r.txt",
        "--tracker",
        "netlink",
        "--",
        "make",
        "-j2",
    ])
    .unwrap();
    let Some(Subcommand::Record(r)) = cli.subcommand else {
        panic!("not a record")
    };
    assert_eq!(r.record, Some(PathBuf::from("run.ste")));
    assert_eq!(r.run.output.output, Some(PathBuf::from("r.txt")));
    assert_eq!(r.run.reports.html, Some(PathBuf::from("r.html")));
    assert_eq!(r.run.command, ["make", "-j2"]);
    assert!(Cli::try_parse_from(["ste", "record", "true"]).is_err());
    // Once the command starts, its flags are its own.
    let cli = Cli::try_parse_from(["ste", "record", "-o", "r.ste", "ls", "--json", "x"]).unwrap();
    let Some(Subcommand::Record(r)) = cli.subcommand else {
        panic!("not a record")
    };
    assert_eq!(r.run.command, ["ls", "--json", "x"]);
    assert_eq!(r.run.output.json, None);
}

#[test]
fn report_formats() {
    let cli = Cli::try_parse_from(["ste", "report", "run.ste", "-f", "perfetto", "-o", "t.json"])
        .unwrap();
    let Some(Subcommand::Report(r)) = cli.subcommand else {
        panic!("not a report")
    };
    assert_eq!(r.format, ReportFormat::Perfetto);
    assert_eq!(r.output, Some(PathBuf::from("t.json")));
    assert!(Cli::try_parse_from(["ste", "report", "r", "--width", "10"]).is_err());
}

#[test]
fn the_command_line_is_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}

#[test]
fn syscalls_take_an_optional_attached_mode() {
    use SyscallsArg as Mode;
    let cli = Cli::try_parse_from(["ste", "--syscalls", "ls", "-l"]).unwrap();
    assert_eq!(cli.run.syscalls.syscalls, Some(Mode::Time));
    assert_eq!(cli.run.command, ["ls", "-l"]);
    let cli = Cli::try_parse_from(["ste", "--syscalls=count", "ls"]).unwrap();
    assert_eq!(cli.run.syscalls.syscalls, Some(Mode::Count));
    let cli =
        Cli::try_parse_from(["ste", "--syscalls=per-process", "--allow-ptrace", "ls"]).unwrap();
    assert_eq!(cli.run.syscalls.syscalls, Some(Mode::PerProcess));
    assert!(cli.run.syscalls.allow_ptrace);
    assert!(Cli::try_parse_from(["ste", "--allow-ptrace", "ls"]).is_err());
    assert!(Cli::try_parse_from(["ste", "--syscalls=everything", "ls"]).is_err());
}

#[test]
fn rejects_bad_values() {
    assert!(Cli::try_parse_from(["ste"]).is_err());
    assert!(Cli::try_parse_from(["ste", "--linger", "soon", "true"]).is_err());
    assert!(Cli::try_parse_from(["ste", "--sample-budget", "0", "true"]).is_err());
    assert!(Cli::try_parse_from(["ste", "--tracker", "magic", "true"]).is_err());
    assert!((parse_percent("2%").unwrap() - 0.02).abs() < 1e-12);
}

#[test]
fn accounting_and_monitor_flags() {
    let cli = Cli::try_parse_from(["ste", "--tree", "--top", "5", "--delays", "make"]).unwrap();
    assert!(cli.run.view.tree && cli.run.accounting.delays);
    assert_eq!(cli.run.view.top, Some(5));
    let cli = Cli::try_parse_from([
        "ste",
        "monitor",
        "--duration",
        "2s",
        "--min-rss",
        "100M",
        "--comm",
        "cc",
        "--json",
    ])
    .unwrap();
    let Some(Subcommand::Monitor(m)) = cli.subcommand else {
        panic!("not monitor")
    };
    assert_eq!(m.min_rss, Some(100 << 20));
    assert_eq!(m.duration, Some(std::time::Duration::from_secs(2)));
    assert!(m.json);
    for bare in [["--duration", "3"], ["--min-cpu", "0.5"]] {
        let cli = Cli::try_parse_from(["ste", "monitor", bare[0], bare[1]]).unwrap();
        assert!(
            matches!(cli.subcommand, Some(Subcommand::Monitor(_))),
            "{bare:?}"
        );
    }
}

#[test]
fn maps_of_a_pid_or_of_a_command() {
    let cli = Cli::try_parse_from(["ste", "maps", "--summary", "42"]).unwrap();
    assert!(
        matches!(cli.subcommand, Some(Subcommand::Maps(ref m)) if m.pid == Some(42) && m.summary && m.command.is_empty())
    );
    let cli = Cli::try_parse_from(["ste", "maps", "--", "ls", "-l"]).unwrap();
    assert!(
        matches!(cli.subcommand, Some(Subcommand::Maps(ref m)) if m.pid.is_none() && m.command == ["ls", "-l"])
    );
    assert!(Cli::try_parse_from(["ste", "maps"]).is_err());
    assert!(Cli::try_parse_from(["ste", "maps", "42", "--", "ls"]).is_err());
    let cli = Cli::try_parse_from(["ste", "--maps-at-peak", "true"]).unwrap();
    assert!(cli.run.anatomy.maps_at_peak);
}

/// An option that only means something beside another is refused when it comes alone, before
/// anything runs, rather than silently doing nothing (issue 45).
#[test]
fn options_that_need_another_are_refused_alone() {
    use clap::error::ErrorKind::{ArgumentConflict, MissingRequiredArgument};
    for (line, kind) in [
        (
            &["ste", "--maps-budget", "2", "true"][..],
            MissingRequiredArgument,
        ),
        (&["ste", "--allow-ptrace", "true"], MissingRequiredArgument),
        // `ste maps PID` maps a process now: the options of a run of a COMMAND clash.
        (
            &["ste", "maps", "--maps-budget", "2", "1"],
            ArgumentConflict,
        ),
        (&["ste", "maps", "--budget", "2", "1"], ArgumentConflict),
        (&["ste", "maps", "-o", "report.txt", "1"], ArgumentConflict),
        (
            &["ste", "maps", "--tracker", "ptrace", "1"],
            ArgumentConflict,
        ),
    ] {
        let e = Cli::parse_args(line).expect_err(&format!("{line:?}"));
        assert_eq!(e.kind(), kind, "{line:?}: {e}");
    }
    for line in [
        &["ste", "--maps-at-peak", "--maps-budget", "2", "true"][..],
        &["ste", "maps", "--maps-budget", "2", "--", "true"],
        &["ste", "maps", "--budget", "2", "--", "true"],
        &["ste", "maps", "1"],
    ] {
        Cli::parse_args(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    }
}

/// `ste report -f html --tree` would draw no tree: refused, naming the option.
#[test]
fn the_text_report_s_options_are_refused_with_another_format() {
    let report = |line: &[&str]| match Cli::parse_args(line).unwrap().subcommand {
        Some(Subcommand::Report(a)) => options::ReportOptions::from_args(a),
        other => panic!("{other:?}"),
    };
    let e = report(&["ste", "report", "r.ste", "-f", "html", "--tree"]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("--tree lays out the text report: -f html takes none of"),
        "{e}"
    );
    assert!(
        report(&[
            "ste",
            "report",
            "r.ste",
            "-f",
            "csv-processes",
            "--width",
            "100"
        ])
        .is_err()
    );
    assert!(report(&["ste", "report", "r.ste", "--tree", "--width", "100"]).is_ok());
    assert!(report(&["ste", "report", "r.ste", "-f", "json"]).is_ok());
}

/// `-o` is the text report wherever a run takes it; the record is `--record FILE`, as the
/// other files a run writes are `--json`, `--html`, `--perfetto` (issue 45). `ste record -o`
/// stays its older spelling.
#[test]
fn a_run_records_with_record_and_o_is_its_report() {
    let run = |line: &[&str]| {
        let cli = Cli::parse_args(line).unwrap();
        match cli.subcommand {
            None => options::RunOptions::from_args(cli.run),
            Some(Subcommand::Record(a)) => options::RunOptions::from_record_args(a),
            other => panic!("{other:?}"),
        }
    };
    let o = run(&["ste", "--record", "r.ste", "-o", "report.txt", "make"]).unwrap();
    assert_eq!(o.record, Some(PathBuf::from("r.ste")));
    assert_eq!(o.output, Some(PathBuf::from("report.txt")));
    let old = run(&["ste", "record", "-o", "r.ste", "make"]).unwrap();
    assert_eq!(old.record, Some(PathBuf::from("r.ste")));
    let new = run(&["ste", "record", "--record", "r.ste", "make"]).unwrap();
    assert_eq!(new.record, Some(PathBuf::from("r.ste")));
    assert!(Cli::parse_args(["ste", "record", "-o", "a", "--record", "b", "make"]).is_err());
}

/// `-` is standard output; two outputs there, or the record (written while the command
/// writes there too), are refused before anything runs (issue 45).
#[test]
fn standard_output_takes_one_output() {
    let run = |line: &[&str]| options::RunOptions::from_args(Cli::parse_args(line).unwrap().run);
    let o = run(&["ste", "--json", "-", "make"]).unwrap();
    assert_eq!(o.json, Some(PathBuf::from("-")));
    let e = run(&["ste", "--json", "-", "--html", "-", "make"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--json and --html all name standard output (-): give all but one of them a file"
    );
    let e = run(&["ste", "--record", "-", "make"]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("the record cannot go to standard output")
    );
}

/// The completions and the man pages come from the parser's own definition.
#[test]
fn completions_and_man_pages_are_made_from_the_parser() {
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut bash = Vec::new();
    clap_complete::generate(
        clap_complete::Shell::Bash,
        &mut cmd.clone(),
        "ste",
        &mut bash,
    );
    let bash = String::from_utf8(bash).unwrap();
    for option in ["--perfetto", "--record", "--width", "--maps-budget"] {
        assert!(bash.contains(option), "{option}");
    }
    let mut man = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut man).unwrap();
    let man = String::from_utf8(man).unwrap();
    assert!(
        man.starts_with(".ie \\n(.g .ds Aq \\(aq") || man.contains(".TH ste 1"),
        "{man}"
    );
    assert!(man.contains("\\-\\-perfetto"), "{man}");
    assert!(matches!(
        Cli::parse_args(["ste", "completions", "zsh"])
            .unwrap()
            .subcommand,
        Some(Subcommand::Completions(_))
    ));
}
