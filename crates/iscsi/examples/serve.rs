//! Serve one target node with the device crate's default target on 127.0.0.1:PORT
//! (default 3260), for trying the target with libiscsi's tools:
//! `cargo run -p iscsi --example serve -- 3260`.

use std::sync::Arc;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port = std::env::args().nth(1).unwrap_or_else(|| "3260".into());
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    let name = "iqn.2026-01.org.stint:example".to_string();
    println!("iscsi://{}/{name}/0", listener.local_addr()?);
    let node = iscsi::TargetNode {
        retired: false,
        gateways: Vec::new(),
        name,
        alias: None,
        target: Arc::new(device::Target::default()),
        allowed_initiators: Vec::new(),
        initiator_classes: Vec::new(),
        chap: None,
        privileged_initiators: vec!["*".into()],
    };
    iscsi::server::serve(listener, vec![node], async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}
