//! The server the power-loss runs crash: this test binary re-executed with [`ENV`] set serves
//! one file LUN through the library crates, as `stint serve` builds it, on a
//! [`PowerLossStore`]. It exits when its stdin closes, so it never outlives the test.

use crate::power_loss::{PowerLossStore, Weaken};
use std::path::PathBuf;
use std::sync::Arc;

/// Set (to the LUN file's path) in the environment of a harness server.
pub const ENV: &str = "STINT_CRASH_SERVE";
pub const TARGET: &str = "iqn.2026-11.dev.stint:crash";

/// How a harness server is asked to run (environment variables, since libtest-free test
/// binaries get cargo's arguments too).
pub struct Spec {
    pub file: PathBuf,
    pub stable: PathBuf,
    pub size: u64,
    pub block_size: u32,
    pub write_cache: bool,
    pub weaken: Weaken,
    pub writeback_seed: u64,
}

impl Spec {
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (ENV, self.file.display().to_string()),
            ("STINT_CRASH_STABLE", self.stable.display().to_string()),
            ("STINT_CRASH_SIZE", self.size.to_string()),
            ("STINT_CRASH_BLOCK", self.block_size.to_string()),
            ("STINT_CRASH_WCE", u8::from(self.write_cache).to_string()),
            ("STINT_CRASH_WEAKEN", self.weaken.name().into()),
            ("STINT_CRASH_WRITEBACK", self.writeback_seed.to_string()),
        ]
    }

    fn from_env() -> Spec {
        let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"));
        let num = |name: &str| var(name).parse::<u64>().expect("a number");
        Spec {
            file: var(ENV).into(),
            stable: var("STINT_CRASH_STABLE").into(),
            size: num("STINT_CRASH_SIZE"),
            block_size: num("STINT_CRASH_BLOCK") as u32,
            write_cache: num("STINT_CRASH_WCE") == 1,
            weaken: Weaken::parse(&var("STINT_CRASH_WEAKEN")).expect("a weakness"),
            writeback_seed: num("STINT_CRASH_WRITEBACK"),
        }
    }
}

/// Serves until killed (or until the test closes our stdin); prints the LUN's URL on stdout.
pub fn serve() {
    std::thread::spawn(|| {
        // EOF (or an error): the test is gone.
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    let spec = Spec::from_env();
    let store = PowerLossStore::open(
        &spec.file,
        spec.size,
        &spec.stable,
        spec.weaken,
        Some(spec.writeback_seed),
    )
    .expect("open the LUN file");
    let mut config = device::LuConfig::new(TARGET, 0, spec.size);
    config.block_size = spec.block_size;
    config.write_cache = spec.write_cache;
    config.write_cache_changeable = spec.write_cache;
    // Asynchronous, as `stint serve`'s file LUNs are (a thread pool over the store).
    let completions = iscsi::clock::Completions::default();
    let plane = store::PoolPlane::new(
        Arc::new(store),
        &store::Options::default(),
        completions.handler(),
    )
    .expect("a data plane");
    let unit = Arc::new(device::Unit::build(config, Arc::new(plane), None).expect("a valid LUN"));
    let node = iscsi::TargetNode {
        retired: false,
        gateways: Vec::new(),
        name: TARGET.into(),
        alias: None,
        target: Arc::new(device::Target::new(vec![(0, unit.clone())])),
        allowed_initiators: vec![],
        initiator_classes: vec![],
        chap: None,
        privileged_initiators: vec![],
    };
    let portal = Arc::new(iscsi::Portal::new(vec![node]));
    completions.bind(&unit, &portal, 0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        println!("iscsi://{}/{TARGET}/0", listener.local_addr().unwrap());
        iscsi::server::serve_portal(listener, portal, std::future::pending())
            .await
            .expect("serve");
    });
}
