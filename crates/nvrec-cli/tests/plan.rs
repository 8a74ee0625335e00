//! `nvrec plan` end to end: the seed's numbers in JSON and in the table, the drive rate taken
//! from a `bench fill` result (one the test writes, one a real fill writes), and bad input
//! refused with exit status 2 and a message naming the option.

mod common;

use common::{json, nvrec, run, text, Scratch};

/// `nvrec --json plan ARGS`, which must succeed.
fn plan_json(args: &[&str]) -> serde_json::Value {
    let output = run(nvrec().arg("--json").arg("plan").args(args));
    assert!(output.status.success(), "{args:?}: {}", text(&output));
    json(&output)
}

/// Runs `nvrec bench ARGS --save FILE` in `scratch`: the saved bench's path.
fn saved_bench(scratch: &Scratch, args: &[&str]) -> std::path::PathBuf {
    let saved = scratch.path(&format!("{}.json", args[0]));
    let output = run(nvrec().arg("bench").args(args).arg("--save").arg(&saved));
    assert!(output.status.success(), "{}", text(&output));
    saved
}

/// The seed's array: 100 GbE onto twelve 30 TB drives rated 1 DWPD over 5 years.
const TWELVE_30TB: [&str; 12] = [
    "--rate",
    "100Gbit/s",
    "--drive-rate",
    "1.6GB/s",
    "--drives",
    "12",
    "--capacity",
    "30TB",
    "--dwpd",
    "1",
    "--warranty",
    "5y",
];

#[test]
fn json_reproduces_the_seed_numbers() {
    for (drive_rate, drives) in [
        ("1.6GB/s", 8),
        ("2.2GB/s", 6),
        ("1.3GB/s", 10),
        ("1600MB/s", 8),
    ] {
        let value = plan_json(&[
            "--rate",
            "100Gbit/s",
            "--drive-rate",
            drive_rate,
            "--margin",
            "0",
        ]);
        assert_eq!(value["drives_needed"], drives, "{drive_rate}");
        assert_eq!(value["rate_bytes_per_s"], 12.5e9);
    }
    // The default margin is 20 %: 12.5 x 1.2 / 1.6 = 9.4.
    let value = plan_json(&["--rate", "12.5GB/s", "--drive-rate", "1.6GB/s"]);
    assert_eq!(value["margin_fraction"], 0.2);
    assert_eq!(value["drives_needed"], 10);

    let value = plan_json(&TWELVE_30TB);
    let hours = value["retention_s"].as_f64().unwrap() / 3600.0;
    assert!((hours - 8.0).abs() < 0.05, "{hours}");
    let years = value["wear_out_years"].as_f64().unwrap();
    assert!((1.6..=1.7).contains(&years), "{years}");
    assert_eq!(value["wears_out_before_warranty"], true);
    assert_eq!(value["survives_one_drive_loss"], true);

    // The same drives rated by TBW (1 x 30 TB x 365 x 5 = 54750 TB), recording half the time.
    let mut tbw: Vec<&str> = TWELVE_30TB[..8].to_vec();
    tbw.extend(["--tbw", "54750TB", "--wear-duty", "50%"]);
    let value = plan_json(&tbw);
    let half_duty_years = value["wear_out_years"].as_f64().unwrap();
    assert!(
        (half_duty_years / years - 2.0).abs() < 1e-9,
        "{half_duty_years}"
    );

    // A RAM buffer for a 500 ms stall of every drive at 12.5 GB/s: 6.25 GB.
    let value = plan_json(&[
        "--rate",
        "100Gbit/s",
        "--drive-rate",
        "1.6GB/s",
        "--stall",
        "500ms",
    ]);
    assert_eq!(value["buffer_all_stall_bytes"], 6.25e9);
}

#[test]
fn table_shows_each_number_with_its_formula() {
    let output = run(nvrec()
        .arg("plan")
        .args(TWELVE_30TB)
        .args(["--stall", "500ms"]));
    assert!(output.status.success(), "{}", text(&output));
    let table = String::from_utf8_lossy(&output.stdout).to_string();
    let row = |name: &str| -> String {
        table
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name}:\n{table}"))
            .to_string()
    };
    for (name, value, formula) in [
        ("target rate", "12.50 GB/s (100.0 Gbit/s", "--rate"),
        (
            "format efficiency",
            "99.90 %",
            "(131072 B chunk - 128 B header) / 131072 B chunk",
        ),
        ("disk rate", "12.51 GB/s", "rate / format efficiency"),
        ("drive rate", "1.60 GB/s", "--drive-rate"),
        (
            "drives needed",
            "10",
            "ceil(disk rate x (1 + 20 % margin) / drive rate) = ceil(9.38)",
        ),
        ("drives evaluated", "12", "--drives"),
        ("per-drive share", "1.04 GB/s", "disk rate / 12 drives"),
        ("headroom", "6.69 GB/s", "12 x drive rate - disk rate"),
        ("one drive lost", "5.09 GB/s", "11 x drive rate - disk rate"),
        ("RAM, all stall", "6.25 GB (5.82 GiB)", "rate x 0.5 s"),
        ("total capacity", "360.00 TB (327.42 TiB)", "12 x 30.00 TB"),
        ("retention", "8.0 h", "total capacity / disk rate"),
        (
            "rated writes",
            "54.75 PB",
            "1 DWPD x capacity x 365 x 5 years",
        ),
        (
            "wear-out",
            "1.67 years",
            "rated writes / written per drive a day / 365",
        ),
    ] {
        let line = row(name);
        assert!(
            line.contains(value) && line.contains(formula),
            "{name}: {line}"
        );
    }
    // The value column lines up.
    let value_column = |line: &str| line.find("12.50 GB/s").or_else(|| line.find("10 "));
    assert_eq!(
        value_column(&row("target rate")),
        value_column(&row("drives needed"))
    );
    assert!(table.contains("still keep up after losing one"), "{table}");
    assert!(table.contains("before their warranty ends"), "{table}");

    // Too few drives: said plainly, still a plan (exit 0).
    let output = run(nvrec().args([
        "plan",
        "--rate",
        "100Gbit/s",
        "--drive-rate",
        "2.2GB/s",
        "--drives",
        "5",
    ]));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("SHORT: 5 drives sustain 1.51 GB/s"),
        "{}",
        text(&output)
    );
}

#[test]
fn from_bench_reads_the_sustained_write_rate() {
    let scratch = Scratch::new("plan-from-bench");
    let write = |name: &str, body: &str| {
        let path = scratch.path(name);
        std::fs::write(&path, body).unwrap();
        path
    };
    let fill = write(
        "fill.json",
        r#"{"meta":{"schema":"nvrec.bench","schema_version":1,"bench":"fill"},
            "summary":{"sustained_write_bytes_per_s":1.3e9,"peak_write_bytes_per_s":2.8e9}}"#,
    );
    let output = run(nvrec()
        .args(["--json", "plan", "--rate", "100Gbit/s", "--margin", "0"])
        .arg("--from-bench")
        .arg(&fill));
    assert!(output.status.success(), "{}", text(&output));
    let value = json(&output);
    assert_eq!(value["drive_rate_bytes_per_s"], 1.3e9);
    assert_eq!(value["drives_needed"], 10);
    // The table names where the drive rate came from.
    let output = run(nvrec()
        .args(["plan", "--rate", "100Gbit/s", "--from-bench"])
        .arg(&fill));
    assert!(
        text(&output).contains("sustained write in") && text(&output).contains("fill.json"),
        "{}",
        text(&output)
    );

    // What is not a fill result, or has no sustained rate, is refused with the reason.
    for (name, body, reason) in [
        (
            "sweep.json",
            r#"{"meta":{"bench":"sweep"},"summary":{}}"#,
            "not a `nvrec bench fill` result",
        ),
        (
            "none.json",
            r#"{"summary":{"sustained_write_bytes_per_s":1.3e9}}"#,
            "not a `nvrec bench fill` result",
        ),
        (
            "missing.json",
            r#"{"meta":{"bench":"fill"},"summary":{}}"#,
            "no positive summary.sustained_write_bytes_per_s",
        ),
        (
            "zero.json",
            r#"{"meta":{"bench":"fill"},"summary":{"sustained_write_bytes_per_s":0}}"#,
            "no positive summary.sustained_write_bytes_per_s",
        ),
        ("broken.json", "{\"meta\":", "is not JSON"),
    ] {
        let path = write(name, body);
        let output = run(nvrec()
            .args(["plan", "--rate", "1G", "--from-bench"])
            .arg(&path));
        assert_eq!(output.status.code(), Some(2), "{name}: {}", text(&output));
        assert!(text(&output).contains(reason), "{name}: {}", text(&output));
    }
    let output = run(nvrec()
        .args(["plan", "--rate", "1G", "--from-bench"])
        .arg(scratch.path("absent.json")));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("cannot read"), "{}", text(&output));
}

#[test]
fn from_bench_takes_a_real_fill() {
    let scratch = Scratch::new("plan-real-fill");
    let saved = saved_bench(
        &scratch,
        &[
            "fill",
            "sim:capacity=256M,cache=0,slow=1.3GB/s",
            "--window",
            "0.01",
        ],
    );
    let output = run(nvrec()
        .args(["--json", "plan", "--rate", "100Gbit/s", "--margin", "0"])
        .arg("--from-bench")
        .arg(&saved));
    assert!(output.status.success(), "{}", text(&output));
    let value = json(&output);
    assert!((value["drive_rate_bytes_per_s"].as_f64().unwrap() / 1.3e9 - 1.0).abs() < 0.01);
    assert_eq!(value["drives_needed"], 10);
}

#[test]
fn from_bench_takes_the_sustained_plateau_and_says_which() {
    let scratch = Scratch::new("plan-plateau");
    let saved = saved_bench(
        &scratch,
        &[
            "fill",
            "sim:capacity=1G,dram=96M,cache=256M,fast=2.8GB/s,slow=1.6GB/s",
            "--io-size",
            "256K",
            "--no-verify",
        ],
    );
    let output = run(nvrec()
        .args(["--json", "plan", "--rate", "100Gbit/s", "--margin", "0"])
        .arg("--from-bench")
        .arg(&saved));
    assert!(output.status.success(), "{}", text(&output));
    let value = json(&output);
    let rate = value["drive_rate_bytes_per_s"].as_f64().unwrap();
    assert!((rate / 1.6e9 - 1.0).abs() < 0.03, "{rate}");
    let plateau = &value["drive_rate_plateau"];
    assert_eq!(
        (plateau["number"].as_u64(), plateau["count"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(plateau["rate_bytes_per_s"].as_f64(), Some(rate));
    assert!(value["drive_rate_source"]
        .as_str()
        .unwrap()
        .contains("plateau 3 of 3"));
    let output = run(nvrec()
        .args(["plan", "--rate", "100Gbit/s", "--from-bench"])
        .arg(&saved));
    assert!(
        text(&output).contains("plateau 3 of 3 (the last, "),
        "{}",
        text(&output)
    );
}

#[test]
fn bad_input_is_a_usage_error() {
    // (arguments after `plan`, what the message must name)
    let cases: [(&[&str], &str); 12] = [
        (&["--rate", "0", "--drive-rate", "1G"], "target rate"),
        (&["--rate", "-5G", "--drive-rate", "1G"], "--rate"),
        (&["--rate", "1G", "--drive-rate", "fast"], "--drive-rate"),
        (&["--rate", "1G", "--drive-rate", "1Q/s"], "--drive-rate"),
        (
            &["--rate", "1G", "--drive-rate", "1G", "--margin", "-5"],
            "margin",
        ),
        (
            &["--rate", "1G", "--drive-rate", "1G", "--margin", "lots"],
            "--margin",
        ),
        (
            &["--rate", "1G", "--drive-rate", "1G", "--duty", "0"],
            "duty",
        ),
        (
            &["--rate", "1G", "--drive-rate", "1G", "--duty", "150%"],
            "duty",
        ),
        (
            &["--rate", "1G", "--drive-rate", "1G", "--dwpd", "1"],
            "capacity",
        ),
        (
            &[
                "--rate",
                "1G",
                "--drive-rate",
                "1G",
                "--capacity",
                "1T",
                "--dwpd",
                "1",
                "--warranty",
                "five",
            ],
            "--warranty",
        ),
        (
            &[
                "--rate",
                "1G",
                "--drive-rate",
                "1G",
                "--stall",
                "5 fortnights",
            ],
            "--stall",
        ),
        (&["--rate", "1G"], "--drive-rate"),
    ];
    for (args, named) in cases {
        let output = run(nvrec().arg("plan").args(args));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        assert!(
            text(&output).contains(named),
            "{args:?} should name {named}: {}",
            text(&output)
        );
    }
}

#[test]
fn retention_frames_and_over_provisioning() {
    // 100 GbE for a week onto 30 TB drives: 12.51 GB/s x 604800 s / 30 TB = 252.2 drives.
    let week = [
        "--rate",
        "100Gbit/s",
        "--drive-rate",
        "1.6GB/s",
        "--capacity",
        "30TB",
        "--retention",
        "7d",
    ];
    let value = plan_json(&week);
    assert_eq!(value["drives_needed_for_rate"], 10);
    assert_eq!(value["drives_needed_for_retention"], 253);
    assert_eq!(value["drives_needed"], 253);
    assert_eq!(value["retention_wanted_s"], 604800.0);
    assert_eq!(value["over_provisioning_advice"]["advice"], "add_drives");
    assert_eq!(value["over_provisioning_advice"]["drive_count"], 281);
    let output = run(nvrec().arg("plan").args(week));
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    assert!(
        shown.contains("drives for retention") && shown.contains("ceil(252.2"),
        "{shown}"
    );
    assert!(
        shown.contains("needs 281 drives for the retention"),
        "{shown}"
    );

    // 1500-byte frames: 83 records a 128 KiB chunk, 94.99 % of it frames.
    let value = plan_json(&[
        "--rate",
        "100Gbit/s",
        "--drive-rate",
        "1.6GB/s",
        "--margin",
        "0",
        "--frame-size",
        "1500",
    ]);
    assert_eq!(value["format"]["records_per_chunk"], 83);
    assert_eq!(value["format"]["record_bytes"], 1568);
    assert_eq!(value["drives_needed"], 9, "13.16 GB/s on the drives");

    // Over-provisioning given shortens the retention; the old --duty still works, warning.
    let value = plan_json(&[
        "--rate",
        "100Gbit/s",
        "--drive-rate",
        "1.6GB/s",
        "--drives",
        "12",
        "--capacity",
        "30TB",
        "--over-provision",
        "10",
    ]);
    assert_eq!(value["over_provisioning_advice"]["advice"], "enough");
    assert_eq!(value["usable_capacity_per_drive_bytes"], 27e12);
    let output = run(nvrec().args(["plan", "--rate", "1G", "--drive-rate", "1G", "--duty", "50"]));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--duty is now --wear-duty"),
        "{}",
        text(&output)
    );
    for (args, named) in [
        (&["--retention", "7d"][..], "--capacity"),
        (
            &["--capacity", "1T", "--retention", "a while"][..],
            "--retention",
        ),
        (&["--frame-size", "200K"][..], "chunk size"),
        (&["--over-provision", "100"][..], "over-provisioning"),
        (&["--duty", "50", "--wear-duty", "50"][..], "--wear-duty"),
    ] {
        let output = run(nvrec()
            .args(["plan", "--rate", "1G", "--drive-rate", "1G"])
            .args(args));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        assert!(text(&output).contains(named), "{args:?}: {}", text(&output));
    }
}

/// The captured sysfs tree of a switch with four Gen3 x4 drives behind one Gen3 x4 uplink.
fn switch_tree() -> String {
    format!(
        "{}/../nvrec/tests/fixtures/sysfs-pcie-switch",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn a_shared_uplink_that_caps_the_rate_is_warned_about() {
    let tree = switch_tree();
    // 10 GB/s over four drives is 2.5 GB/s each: 10 GB/s through a 3.94 GB/s uplink.
    let args = [
        "--rate",
        "10GB/s",
        "--drive-rate",
        "3GB/s",
        "--drives",
        "4",
        "--pcie-drives",
        "nvme0,nvme1,nvme2,nvme3",
        "--sysfs-root",
        &tree,
    ];
    let value = plan_json(&args);
    let caps = value["uplink_caps"].as_array().unwrap();
    assert_eq!(caps.len(), 1, "{value:#}");
    assert_eq!(caps[0]["uplink"], "0000:01:00.0");
    assert_eq!(caps[0]["drives"].as_array().unwrap().len(), 4);
    assert_eq!(value["pcie_uplinks"].as_array().unwrap().len(), 2);
    let output = run(nvrec().arg("plan").args(args));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("WARNING: uplink 0000:01:00.0 carries 3.94 GB/s"),
        "{}",
        text(&output)
    );
    // One drive behind the switch and the one on its own root port: no cap.
    let value = plan_json(&[
        "--rate",
        "5GB/s",
        "--drive-rate",
        "3GB/s",
        "--drives",
        "2",
        "--pcie-drives",
        "nvme0,nvme4",
        "--sysfs-root",
        &tree,
    ]);
    assert!(
        value["uplink_caps"].as_array().unwrap().is_empty(),
        "{value:#}"
    );
    let output = run(nvrec().args([
        "plan",
        "--rate",
        "1G",
        "--drive-rate",
        "1G",
        "--pcie-drives",
        "nvme9",
        "--sysfs-root",
        &tree,
    ]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("nvme9"), "{}", text(&output));

    // `devices` walks the same tree: the group, its limit, each drive's links.
    let output = run(nvrec().args(["devices", "--quick", "--sysfs-root", &tree]));
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    assert!(
        shown.contains("uplink 0000:01:00.0 (8.0 GT/s PCIe x4, 3.94 GB/s) under root port 0000:00:01.0: 4 drive(s)"),
        "{shown}"
    );
    assert!(shown.contains("the uplink caps them"), "{shown}");
    assert!(
        shown.contains("nvme2: 0000:05:00.0 8.0 GT/s PCIe x4 -> 0000:02:03.0"),
        "{shown}"
    );
    let output = run(nvrec().args(["--json", "devices", "--quick", "--sysfs-root", &tree]));
    assert!(output.status.success(), "{}", text(&output));
    let uplinks = &json(&output)["pcie_uplinks"];
    assert_eq!(uplinks[0]["caps_drives"], true);
    assert_eq!(uplinks[1]["drives"][0]["controller"], "nvme4");
}

/// A ring lives at the rate its drives write once they overwrite what they hold: `plan`
/// takes it from an overwrite bench (the slowest phase after the wrap), says so, and refuses
/// one that never wrapped.
#[test]
fn from_bench_takes_an_overwrite_s_rate_after_the_wrap() {
    let scratch = Scratch::new("plan-overwrite");
    let saved = scratch.path("overwrite.json");
    std::fs::write(
        &saved,
        r#"{"meta":{"schema":"nvrec.bench","schema_version":1,"bench":"overwrite"},
            "phases":[
              {"mode":"no_trim","rate_before_wrap_bytes_per_s":2.0e9,"rate_after_wrap_bytes_per_s":1.0e9},
              {"mode":"trim","rate_before_wrap_bytes_per_s":2.0e9,"rate_after_wrap_bytes_per_s":1.6e9}]}"#,
    )
    .unwrap();
    let output = run(nvrec()
        .args(["--json", "plan", "--rate", "100Gbit/s", "--margin", "0"])
        .arg("--from-bench")
        .arg(&saved));
    assert!(output.status.success(), "{}", text(&output));
    let value = json(&output);
    assert_eq!(value["drive_rate_bytes_per_s"], 1.0e9);
    assert_eq!(value["drives_needed"], 13);
    let output = run(nvrec()
        .args(["plan", "--rate", "100Gbit/s", "--from-bench"])
        .arg(&saved));
    assert!(
        text(&output).contains("rate after the wrap of an overwrite (no_trim"),
        "{}",
        text(&output)
    );
    let never = scratch.path("never.json");
    std::fs::write(
        &never,
        r#"{"meta":{"bench":"overwrite"},"phases":[{"mode":"trim","rate_after_wrap_bytes_per_s":0}]}"#,
    )
    .unwrap();
    let output = run(nvrec()
        .args(["plan", "--rate", "1G", "--from-bench"])
        .arg(&never));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("never wrapped"), "{}", text(&output));
}

/// A real overwrite bench of a simulated drive that slows once it writes over itself.
#[test]
fn from_bench_takes_a_real_overwrite() {
    let scratch = Scratch::new("plan-real-overwrite");
    let saved = saved_bench(
        &scratch,
        &[
            "overwrite",
            "sim:capacity=128M,cache=0,slow=1.3GB/s",
            "--size",
            "64M",
            "--window",
            "0.01",
        ],
    );
    let saved_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let slowest = saved_json["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["rate_after_wrap_bytes_per_s"].as_f64())
        .filter(|r| *r > 0.0)
        .fold(f64::INFINITY, f64::min);
    let output = run(nvrec()
        .args(["--json", "plan", "--rate", "10Gbit/s", "--margin", "0"])
        .arg("--from-bench")
        .arg(&saved));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["drive_rate_bytes_per_s"], slowest);
}
