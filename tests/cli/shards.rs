//! A prefix split into shards at scale: the listings read the shards at once and print
//! what reading them one after the other printed, and `load` reads its file twice
//! whatever the number of shards.

use tempfile::TempDir;

use crate::harness::*;

/// Jobs of the listing test: over 1000 rules a shard of 12 (two in three of all but
/// one in 12), so that every shard's reader hands over more than one chunk of rows or
/// of findings, and the printer takes shards that read ahead.
const JOBS: usize = 21_600;

/// Writes `NAME.toml` in `d`: `prefix`, `shards` and the server's URL.
fn config(d: &TempDir, name: &str, prefix: &str, shards: u32, server: &RedisServer) {
    let text = format!(
        "[redbike]\nprefix = {prefix:?}\nshards = {shards}\n\n[redbike-redis]\nurl = {:?}\n",
        server.url()
    );
    std::fs::write(path(d, &format!("{name}.toml")), text).unwrap();
}

/// `redbike -c NAME.toml` in `d`.
fn rb(d: &TempDir, name: &str) -> Bike {
    bare(d.path())
        .env_remove("REDBIKE_PREFIX")
        .args(["-c", &format!("{name}.toml")])
}

/// A `JOBID,SCHEDULE` file of `n` jobs over three queues and four kinds of schedule,
/// one in `now_every` enqueued at once (`NOW`).
fn rows(n: usize, t0: i64, now_every: usize) -> String {
    (0..n)
        .map(|i| {
            let schedule = match (i % now_every, i % 3) {
                (0, _) => "NOW".to_string(),
                (_, 0) => format!("AT:{}", t0 + 3600 + i as i64),
                (_, 1) => "FREQ=HOURLY".to_string(),
                _ => "CRON:*/5 * * * *".to_string(),
            };
            format!("job{i}:Q{},{schedule}\r\n", i % 3)
        })
        .collect()
}

/// `statuses` rows without their time (the writes of two prefixes may fall in two
/// seconds).
fn without_times(statuses: &str) -> Vec<&str> {
    statuses
        .lines()
        .map(|l| l.rsplit_once(',').map_or(l, |(row, _)| row))
        .collect()
}

#[test]
fn listings_of_twelve_shards_print_what_one_shard_after_another_printed() {
    let server = RedisServer::start();
    let d = workdir();
    config(&d, "one", "{one}", 1, &server);
    config(&d, "twelve", "{twelve}", 12, &server);
    for k in 0..12 {
        config(
            &d,
            &format!("shard{k}"),
            &format!("{{twelve/{k}}}"),
            1,
            &server,
        );
    }
    std::fs::write(path(&d, "jobs.csv"), rows(JOBS, now(), 12)).unwrap();
    for name in ["one", "twelve"] {
        let out = rb(&d, name).args(["load", "jobs.csv"]).ok();
        assert!(out.contains(&format!("loaded {JOBS} job(s)")), "{out}");
    }
    // Every job of a rule out of circulation (an `AT` off the timeline is done): a
    // finding each for `check`, over a thousand in every shard.
    let mut con = server.con();
    for key in std::iter::once("{one}-timeline".to_string())
        .chain((0..12).map(|k| format!("{{twelve/{k}}}-timeline")))
    {
        let _: () = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
    }

    // Sorted listings: byte for byte the unsplit prefix's (statuses without their
    // times), and the shards' own listings put together.
    let schedules = rb(&d, "twelve").args(["schedules"]).ok();
    assert_eq!(schedules.lines().count(), JOBS);
    assert_eq!(schedules, rb(&d, "one").args(["schedules"]).ok());
    let statuses = rb(&d, "twelve").args(["statuses"]).ok();
    assert_eq!(statuses.lines().count(), JOBS);
    let unsplit = rb(&d, "one").args(["statuses"]).ok();
    assert_eq!(without_times(&statuses), without_times(&unsplit));
    let mut shards: Vec<String> = (0..12)
        .flat_map(|k| {
            let out = rb(&d, &format!("shard{k}")).args(["statuses"]).ok();
            out.split_inclusive('\n')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    shards.sort();
    assert_eq!(statuses, shards.concat());

    // `check` prints as it walks: shard 0's findings, then shard 1's, and so on, each
    // in its walk's order, exactly as the shards checked one after the other print.
    let split = rb(&d, "twelve").args(["check"]).run().code(1);
    let apart: Vec<String> = (0..12)
        .map(|k| {
            rb(&d, &format!("shard{k}"))
                .args(["check"])
                .run()
                .code(1)
                .stdout
        })
        .collect();
    for (k, rows) in apart.iter().enumerate() {
        assert!(rows.lines().count() > 1002, "shard {k}: {rows}");
    }
    assert_eq!(split.stdout, apart.concat());
    let problems = split.stdout.lines().count();
    assert!(
        split
            .stderr
            .contains(&format!("check: {problems} problem(s) in {JOBS} job(s)")),
        "{}",
        split.stderr
    );

    // stats --scan adds up the shards as an unsplit prefix counts.
    let stats = |name: &str| {
        let out = rb(&d, name)
            .args(["stats", "--format", "json", "--scan"])
            .ok();
        let mut v: serde_json::Value = serde_json::from_str(&out).unwrap();
        for k in ["prefix", "time", "redis", "lease_keys"] {
            v.as_object_mut().unwrap().remove(k);
        }
        for q in v["queues"].as_array_mut().into_iter().flatten() {
            q.as_object_mut().unwrap().remove("oldest_age_seconds");
        }
        v
    };
    assert_eq!(stats("one"), stats("twelve"));
}

/// The readings `redbike -v load` said it began of `file`.
fn readings(stderr: &str, file: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.contains(&format!("{file}: reading ")))
        .count()
}

#[test]
fn load_into_twelve_shards_reads_its_file_twice() {
    let server = RedisServer::start();
    let d = workdir();
    config(&d, "one", "{one}", 1, &server);
    config(&d, "twelve", "{twelve}", 12, &server);
    // Over a batch a shard, so that batches of several shards fill and are written
    // while the file is read.
    let n = 15_000;
    let file = rows(n, now(), 4);
    std::fs::write(path(&d, "jobs.csv"), &file).unwrap();
    for name in ["one", "twelve"] {
        let out = rb(&d, name).args(["-v", "load", "jobs.csv"]).run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stdout.contains(&format!("loaded {n} job(s)")));
        assert_eq!(
            readings(&out.stderr, "jobs.csv"),
            2,
            "{name}: {}",
            out.stderr
        );
    }
    // From standard input too: read once, and once more from the copy.
    let piped: String = (0..3000).map(|i| format!("piped{i}:Q1,STOP\r\n")).collect();
    let out = rb(&d, "twelve")
        .args(["-v", "load", "-"])
        .stdin(piped)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("loaded 3000 job(s)"), "{}", out.stdout);
    assert_eq!(readings(&out.stderr, "<stdin>"), 2, "{}", out.stderr);

    // Every job in its shard, as an unsplit prefix holds them.
    let mut con = server.con();
    let held: usize = (0..12)
        .map(|k| {
            redis::cmd("HLEN")
                .arg(format!("{{twelve/{k}}}-schedules"))
                .query::<usize>(&mut con)
                .unwrap()
        })
        .sum();
    assert_eq!(held, n + 3000);
    let one: Vec<String> = rb(&d, "one")
        .args(["schedules"])
        .ok()
        .lines()
        .map(str::to_string)
        .collect();
    let twelve = rb(&d, "twelve").args(["schedules"]).ok();
    let twelve: Vec<&str> = twelve.lines().filter(|l| !l.starts_with("piped")).collect();
    assert_eq!(one, twelve);
    let statuses = rb(&d, "twelve").args(["statuses"]).ok();
    let unsplit = rb(&d, "one").args(["statuses"]).ok();
    let statuses: Vec<&str> = without_times(&statuses)
        .into_iter()
        .filter(|l| !l.starts_with("piped"))
        .collect();
    assert_eq!(statuses, without_times(&unsplit));
    assert_eq!(rb(&d, "twelve").args(["check"]).run().code, 0);

    // A bad row anywhere writes nothing in any shard.
    let dbsize = server.dbsize();
    let bad = format!("{file}late:Q1,FREQ=NEVER\r\n");
    std::fs::write(path(&d, "bad.csv"), bad).unwrap();
    rb(&d, "twelve")
        .args(["load", "bad.csv"])
        .run()
        .fails(2, &format!("bad.csv: line {}", n + 1));
    assert_eq!(server.dbsize(), dbsize);
}
