//! The crate's initiator against its server on 127.0.0.1 (port 0): login negotiation,
//! discovery, NOP, the CmdSN window, task management, Reject and logout.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use iscsi::bhs::{Bhs, Opcode};
use iscsi::initiator::{Error, Initiator, LoginOptions};
use iscsi::login::LoginStatus;
use iscsi::tmf::{Function, Response};
use iscsi::TargetNode;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use common::{INITIATOR, TARGET};

const OTHER: &str = "iqn.2026-01.org.stint:other";

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start() -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let node = |name: &str, allowed: Vec<String>, privileged: Vec<String>| TargetNode {
            retired: false,
            gateways: Vec::new(),
            name: name.into(),
            alias: None,
            target: common::RamDisk::new(8),
            allowed_initiators: allowed,
            initiator_classes: Vec::new(),
            chap: None,
            privileged_initiators: privileged,
        };
        let nodes = vec![
            node(TARGET, Vec::new(), vec!["*".into()]),
            node(OTHER, vec!["iqn.only-this-one".into()], Vec::new()),
        ];
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(iscsi::server::serve(listener, nodes, async {
            let _ = rx.await;
        }));
        Server {
            addr,
            stop: Some(tx),
            task,
        }
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.await.unwrap().unwrap();
    }

    async fn login(&self) -> Initiator {
        Initiator::connect(self.addr, &LoginOptions::new(INITIATOR, Some(TARGET)))
            .await
            .unwrap()
    }
}

fn key<'a>(ini: &'a Initiator, k: &str) -> Option<&'a str> {
    ini.login_keys
        .iter()
        .find(|(n, _)| n == k)
        .map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn normal_login_negotiates_and_logs_out() {
    let server = Server::start().await;
    let mut opts = LoginOptions::new(INITIATOR, Some(TARGET));
    opts.extra_keys
        .push(("X-org.example.Unknown".into(), "1".into()));
    let ini = Initiator::connect(server.addr, &opts).await.unwrap();
    assert_eq!(key(&ini, "TargetPortalGroupTag"), Some("1"));
    assert_eq!(key(&ini, "MaxRecvDataSegmentLength"), Some("262144"));
    assert_eq!(key(&ini, "InitialR2T"), Some("No"));
    assert_eq!(key(&ini, "FirstBurstLength"), Some("262144"));
    assert_eq!(key(&ini, "MaxConnections"), Some("1"));
    assert_eq!(key(&ini, "X-org.example.Unknown"), Some("NotUnderstood"));
    assert_ne!(ini.tsih(), 0);
    assert_eq!(ini.params().target_max_recv_data_segment_length, 262_144);
    assert_eq!(ini.logout().await.unwrap(), 0);
    server.stop().await;
}

#[tokio::test]
async fn login_refusals_have_precise_status() {
    let server = Server::start().await;
    let fail = |r: Result<Initiator, Error>| match r {
        Err(Error::LoginFailed(s)) => s,
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("login succeeded"),
    };
    let r = Initiator::connect(server.addr, &LoginOptions::new(INITIATOR, Some("iqn.nope"))).await;
    assert_eq!(fail(r), LoginStatus::NOT_FOUND);
    // A protected target answers an initiator outside its ACL as if it did not exist.
    let r = Initiator::connect(server.addr, &LoginOptions::new(INITIATOR, Some(OTHER))).await;
    assert_eq!(fail(r), LoginStatus::NOT_FOUND);
    let r = Initiator::connect(
        server.addr,
        &LoginOptions::new("iqn.only-this-one", Some(OTHER)),
    )
    .await;
    assert!(r.is_ok());
    server.stop().await;
}

#[tokio::test]
async fn discovery_lists_allowed_targets() {
    let server = Server::start().await;
    let mut d = Initiator::connect(server.addr, &LoginOptions::new(INITIATOR, None))
        .await
        .unwrap();
    assert_eq!(key(&d, "TargetPortalGroupTag"), None);
    let targets = d.send_targets().await.unwrap();
    let expected_address = format!("{},1", server.addr);
    assert_eq!(targets, vec![(TARGET.to_string(), vec![expected_address])]);
    assert_eq!(d.logout().await.unwrap(), 0);
    server.stop().await;
}

#[tokio::test]
async fn a_gateway_node_lists_every_gateway_and_declares_its_own_portal_group() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gateway = |address: String, tag: u16, own: bool| iscsi::GatewayPortal {
        address,
        portal_group_tag: tag,
        own,
    };
    let node = TargetNode {
        retired: false,
        gateways: vec![
            gateway("192.0.2.1:3260".into(), 1, false),
            gateway(addr.to_string(), 2, true),
        ],
        name: TARGET.into(),
        alias: None,
        target: common::RamDisk::new(8),
        allowed_initiators: Vec::new(),
        initiator_classes: Vec::new(),
        chap: None,
        privileged_initiators: Vec::new(),
    };
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(iscsi::server::serve(listener, vec![node], async {
        let _ = rx.await;
    }));
    let mut d = Initiator::connect(addr, &LoginOptions::new(INITIATOR, None))
        .await
        .unwrap();
    let listed = vec!["192.0.2.1:3260,1".to_string(), format!("{addr},2")];
    assert_eq!(
        d.send_targets().await.unwrap(),
        vec![(TARGET.to_string(), listed)]
    );
    d.logout().await.unwrap();
    let s = Initiator::connect(addr, &LoginOptions::new(INITIATOR, Some(TARGET)))
        .await
        .unwrap();
    assert_eq!(key(&s, "TargetPortalGroupTag"), Some("2"));
    s.logout().await.unwrap();
    let _ = tx.send(());
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn digests_can_be_negotiated() {
    let server = Server::start().await;
    let mut opts = LoginOptions::new(INITIATOR, Some(TARGET));
    opts.digests = true;
    let mut ini = Initiator::connect(server.addr, &opts).await.unwrap();
    assert!(ini.params().header_digest && ini.params().data_digest);
    assert_eq!(ini.nop(b"digest ping").await.unwrap(), b"digest ping");
    ini.logout().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn nop_echoes_ping_data() {
    let server = Server::start().await;
    let mut ini = server.login().await;
    let data: Vec<u8> = (0..1001u32).map(|i| i as u8).collect();
    assert_eq!(ini.nop(&data).await.unwrap(), data);
    assert_eq!(ini.nop(&[]).await.unwrap(), Vec::<u8>::new());
    ini.logout().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn out_of_window_commands_are_ignored_and_the_session_survives() {
    let server = Server::start().await;
    let mut ini = server.login().await;
    let (cmdsn, max_cmdsn) = ini.cmdsn();
    let tur = common::test_unit_ready();
    // Too high, then too low: no answer, no disconnect.
    ini.send_command_with_cmdsn(0, &tur, 0, max_cmdsn.wrapping_add(1))
        .await
        .unwrap();
    ini.send_command_with_cmdsn(0, &tur, 0, cmdsn.wrapping_sub(1))
        .await
        .unwrap();
    let quiet = ini.recv_timeout(Duration::from_millis(300)).await.unwrap();
    assert!(
        quiet.is_none(),
        "target answered an out-of-window command: {quiet:?}"
    );
    // The expected CmdSN still works.
    let r = ini.scsi_command(0, &tur, &[], 0).await.unwrap();
    assert!(
        r.status == 0x00 || r.status == 0x02,
        "status {:#x}",
        r.status
    );
    assert_eq!(ini.nop(b"alive").await.unwrap(), b"alive");
    ini.logout().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn task_management_functions() {
    let server = Server::start().await;
    let mut ini = server.login().await;
    // No such task: it already completed or never existed.
    assert_eq!(
        ini.task_management(Function::AbortTask, 0, 0x1234)
            .await
            .unwrap(),
        Response::TaskDoesNotExist
    );
    for f in [
        Function::AbortTaskSet,
        Function::ClearTaskSet,
        Function::LogicalUnitReset,
        Function::TargetWarmReset,
    ] {
        assert_eq!(
            ini.task_management(f, 0, 0xFFFF_FFFF).await.unwrap(),
            Response::FunctionComplete,
            "{f:?}"
        );
    }
    assert_eq!(
        ini.task_management(Function::TaskReassign, 0, 1)
            .await
            .unwrap(),
        Response::TaskAllegianceReassignmentNotSupported
    );
    assert_eq!(ini.nop(b"x").await.unwrap(), b"x");
    // Cold reset answers, then drops the connection.
    assert_eq!(
        ini.task_management(Function::TargetColdReset, 0, 0xFFFF_FFFF)
            .await
            .unwrap(),
        Response::FunctionComplete
    );
    assert!(ini.nop(b"x").await.is_err());
    drop(ini);
    server.stop().await;
}

#[tokio::test]
async fn unknown_opcode_is_rejected_with_its_header() {
    let server = Server::start().await;
    let mut ini = server.login().await;
    let mut b = Bhs::new(Opcode::NopOut);
    b.0[0] = 0x1C; // vendor-specific opcode
    b.set_itt(77);
    ini.send(&b, &[]).await.unwrap();
    let p = ini.recv().await.unwrap();
    assert_eq!(p.bhs.opcode(), Some(Opcode::Reject));
    assert_eq!(p.bhs.0[2], 0x05); // Command not supported
    assert_eq!(p.data.len(), 48);
    assert_eq!(p.data[0] & 0x3F, 0x1C);
    assert_eq!(ini.nop(b"still here").await.unwrap(), b"still here");
    ini.logout().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn oversized_data_segment_drops_the_connection() {
    let server = Server::start().await;
    let mut ini = server.login().await;
    let mut b = Bhs::new(Opcode::NopOut);
    b.set_immediate(true);
    b.set_itt(5);
    b.set_data_segment_len(0xFF_FFFF);
    ini.send_raw(&b.0).await.unwrap();
    match ini.recv_timeout(Duration::from_secs(5)).await {
        Err(Error::Io(_)) => {}
        other => panic!("connection not dropped: {other:?}"),
    }
    drop(ini);
    server.stop().await;
}

#[tokio::test]
async fn shutdown_asks_initiators_to_log_out() {
    let mut server = Server::start().await;
    let mut polite = server.login().await;
    let mut opts = LoginOptions::new(INITIATOR, Some(TARGET));
    opts.isid[5] ^= 0xFF;
    let mut deaf = Initiator::connect(server.addr, &opts).await.unwrap();
    let _ = server.stop.take().unwrap().send(());
    // Asynchronous Message, AsyncEvent 1 "target requests Logout" (RFC 7143 §11.9.1).
    let msg = polite.recv().await.unwrap();
    assert_eq!(msg.bhs.opcode(), Some(Opcode::AsyncMessage));
    assert_eq!(msg.bhs.0[36], 1);
    assert_eq!(polite.logout().await.unwrap(), 0);
    // One that ignores the request is closed after the grace period.
    let started = std::time::Instant::now();
    assert_eq!(
        deaf.recv().await.unwrap().bhs.opcode(),
        Some(Opcode::AsyncMessage)
    );
    server.task.await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(deaf.nop(b"gone").await.is_err());
}

#[tokio::test]
async fn same_initiator_port_reinstates_the_session() {
    let server = Server::start().await;
    let mut first = server.login().await;
    assert_eq!(first.nop(b"1").await.unwrap(), b"1");
    // Same InitiatorName and ISID: the old session ends (RFC 7143 §6.3.5).
    let mut second = server.login().await;
    assert_eq!(second.nop(b"2").await.unwrap(), b"2");
    assert!(first.nop(b"1").await.is_err());
    // A different ISID is a different initiator port: both sessions live.
    let mut opts = LoginOptions::new(INITIATOR, Some(TARGET));
    opts.isid[5] ^= 0xFF;
    let mut third = Initiator::connect(server.addr, &opts).await.unwrap();
    assert_eq!(third.nop(b"3").await.unwrap(), b"3");
    assert_eq!(second.nop(b"2").await.unwrap(), b"2");
    drop(first);
    drop(second);
    drop(third);
    server.stop().await;
}

#[tokio::test]
async fn cold_reset_ends_every_session_of_the_target() {
    let server = Server::start().await;
    let mut a = server.login().await;
    let mut opts = LoginOptions::new(INITIATOR, Some(TARGET));
    opts.isid[5] ^= 0xFF;
    let mut b = Initiator::connect(server.addr, &opts).await.unwrap();
    let mut other = Initiator::connect(
        server.addr,
        &LoginOptions::new("iqn.only-this-one", Some(OTHER)),
    )
    .await
    .unwrap();
    assert_eq!(
        a.task_management(Function::TargetColdReset, 0, 0xFFFF_FFFF)
            .await
            .unwrap(),
        Response::FunctionComplete
    );
    assert!(b.nop(b"b").await.is_err());
    assert!(a.nop(b"a").await.is_err());
    // Sessions of other target nodes are untouched.
    assert_eq!(other.nop(b"o").await.unwrap(), b"o");
    drop(a);
    drop(b);
    drop(other);
    server.stop().await;
}

/// An initiator without the privilege cannot reset the target: RFC 7143 §11.6.1 response 6,
/// and every session carries on (issue 11: any initiator could close the others' sessions).
#[tokio::test]
async fn target_resets_need_the_privilege() {
    let server = Server::start().await;
    let options = LoginOptions::new("iqn.only-this-one", Some(OTHER));
    let mut a = Initiator::connect(server.addr, &options).await.unwrap();
    let mut b_options = options.clone();
    b_options.isid[5] ^= 0xFF;
    let mut b = Initiator::connect(server.addr, &b_options).await.unwrap();
    for function in [Function::TargetWarmReset, Function::TargetColdReset] {
        assert_eq!(
            a.task_management(function, 0, 0xFFFF_FFFF).await.unwrap(),
            Response::FunctionAuthorizationFailed
        );
    }
    assert_eq!(a.nop(b"a").await.unwrap(), b"a");
    assert_eq!(b.nop(b"b").await.unwrap(), b"b");
    drop(a);
    drop(b);
    server.stop().await;
}

/// The server task of a test portal.
type Served = JoinHandle<std::io::Result<()>>;

/// A portal on 127.0.0.1 serving one RAM disk of `blocks` with the given keepalive interval;
/// sending on the channel stops it.
async fn keepalive_portal(
    blocks: usize,
    nop_in_interval: Option<Duration>,
) -> (SocketAddr, oneshot::Sender<()>, Served) {
    test_portal(blocks, |p| p.nop_in_interval = nop_in_interval).await
}

/// A portal on 127.0.0.1 serving one RAM disk of `blocks`, set up by `tweak`.
async fn test_portal(
    blocks: usize,
    tweak: impl FnOnce(&mut iscsi::Portal),
) -> (SocketAddr, oneshot::Sender<()>, Served) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut portal = iscsi::Portal::new(vec![TargetNode {
        retired: false,
        gateways: Vec::new(),
        name: TARGET.into(),
        alias: None,
        target: common::RamDisk::new(blocks),
        allowed_initiators: Vec::new(),
        initiator_classes: Vec::new(),
        chap: None,
        privileged_initiators: vec!["*".into()],
    }]);
    tweak(&mut portal);
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(iscsi::server::serve_portal(
        listener,
        std::sync::Arc::new(portal),
        async {
            let _ = rx.await;
        },
    ));
    (addr, tx, server)
}

#[tokio::test]
async fn idle_initiators_are_pinged_and_silent_ones_dropped() {
    let (addr, tx, server) = keepalive_portal(8, Some(Duration::from_millis(150))).await;
    let opts = LoginOptions::new(INITIATOR, Some(TARGET));

    // An initiator that answers the ping stays connected.
    let mut live = Initiator::connect(addr, &opts).await.unwrap();
    let ping = live
        .recv_timeout(Duration::from_secs(2))
        .await
        .unwrap()
        .expect("no NOP-In ping");
    assert_eq!(ping.bhs.opcode(), Some(Opcode::NopIn));
    assert_eq!(ping.bhs.itt(), 0xFFFF_FFFF);
    assert_ne!(ping.bhs.u32_at(20), 0xFFFF_FFFF);
    let mut answer = Bhs::new(Opcode::NopOut);
    answer.set_immediate(true);
    answer.set_flags(0x80);
    answer.set_itt(0xFFFF_FFFF);
    answer.set_u32_at(20, ping.bhs.u32_at(20));
    answer.set_u32_at(24, live.cmdsn().0);
    live.send(&answer, &[]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(live.nop(b"still").await.unwrap(), b"still");

    // One that ignores it is dropped after a second quiet interval.
    let mut silent = Initiator::connect(
        addr,
        &LoginOptions {
            isid: [0x80, 0, 0, 0, 0, 9],
            ..opts
        },
    )
    .await
    .unwrap();
    let ping = silent.recv_timeout(Duration::from_secs(2)).await.unwrap();
    assert!(ping.is_some_and(|p| p.bhs.opcode() == Some(Opcode::NopIn)));
    assert!(matches!(
        silent.recv_timeout(Duration::from_secs(2)).await,
        Err(Error::Io(_))
    ));
    let _ = tx.send(());
    server.await.unwrap().unwrap();
}

/// A portal with a 1 MiB disk and the given keepalive interval, and an initiator logged in
/// to it that sends 64 reads of 1 MiB (far more than the socket buffers hold) and reads none.
async fn stalled_reader(
    nop_in_interval: Option<Duration>,
) -> (Initiator, oneshot::Sender<()>, Served) {
    let (addr, tx, server) = keepalive_portal(2048, nop_in_interval).await;
    let opts = LoginOptions::new(INITIATOR, Some(TARGET));
    let mut stalled = Initiator::connect(addr, &opts).await.unwrap();
    for _ in 0..64 {
        stalled
            .submit(0, &common::read10(0, 2048), Vec::new(), 1 << 20)
            .await
            .unwrap();
    }
    (stalled, tx, server)
}

/// A peer that stops reading is dropped once it takes nothing for a keepalive interval
/// (issue 11: such connections were pinned forever).
#[tokio::test]
async fn a_peer_that_stops_reading_is_dropped() {
    let (mut stalled, tx, server) = stalled_reader(Some(Duration::from_millis(300))).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // What it finally reads is what the buffers held, then the end of the connection.
    let mut got = 0usize;
    loop {
        match stalled.recv_timeout(Duration::from_secs(2)).await {
            Ok(Some(p)) => got += p.data.len(),
            Ok(None) => panic!("the connection is still open after {got} bytes"),
            Err(_) => break,
        }
    }
    assert!(got < 64 << 20, "{got}");
    let _ = tx.send(());
    server.await.unwrap().unwrap();
}

/// Shutdown does not wait for a peer that stopped reading (issue 11: SIGTERM hung), even
/// without a keepalive interval to drop it.
#[tokio::test]
async fn shutdown_does_not_wait_for_a_peer_that_stopped_reading() {
    let (stalled, tx, server) = stalled_reader(None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = tx.send(());
    tokio::time::timeout(Duration::from_secs(3), server)
        .await
        .expect("shutdown waited for a stalled reader")
        .unwrap()
        .unwrap();
    drop(stalled);
}

#[tokio::test]
async fn url_portal_login_and_cmdsn_window() {
    let server = Server::start().await;
    let url: iscsi::url::IscsiUrl = format!("iscsi://{}/{TARGET}/0", server.addr)
        .parse()
        .unwrap();
    let mut ini = Initiator::connect_portal(
        &url.portal,
        &LoginOptions::new(INITIATOR, Some(&url.target)),
    )
    .await
    .unwrap();
    // The window holds the portal's queue depth (128 commands).
    let (cmdsn, max_cmdsn) = ini.cmdsn();
    assert_eq!(max_cmdsn.wrapping_sub(cmdsn), 127);
    assert!(ini.window_open());
    assert_eq!(ini.nop(b"u").await.unwrap(), b"u");
    ini.logout().await.unwrap();
    server.stop().await;
}

/// A TCP connection to `addr` from the loopback address `from`; whether the server closed it
/// within half a second.
async fn closed_at_once(addr: SocketAddr, from: [u8; 4]) -> (tokio::net::TcpStream, bool) {
    use tokio::io::AsyncReadExt;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((from, 0).into()).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_millis(500), stream.read(&mut byte)).await;
    let closed = matches!(read, Ok(Ok(0)) | Ok(Err(_)));
    (stream, closed)
}

/// Beyond its connection limits (here 2 per address, 3 in all) the portal closes a new
/// connection at once; below them again it serves one.
#[tokio::test]
async fn connections_beyond_the_limits_are_closed() {
    let (addr, tx, server) = test_portal(8, |p| {
        p.max_connections = 3;
        p.max_connections_per_address = 2;
    })
    .await;
    let opts = |n: u8| LoginOptions {
        isid: [0x80, 0, 0, 0, 0, n],
        ..LoginOptions::new(INITIATOR, Some(TARGET))
    };
    let first = Initiator::connect(addr, &opts(1)).await.unwrap();
    let mut second = Initiator::connect(addr, &opts(2)).await.unwrap();
    let (_third, closed) = closed_at_once(addr, [127, 0, 0, 1]).await;
    assert!(closed, "a third connection from 127.0.0.1 was served");
    let (_other, closed) = closed_at_once(addr, [127, 0, 0, 2]).await;
    assert!(!closed, "the first connection from 127.0.0.2 was closed");
    let (_fourth, closed) = closed_at_once(addr, [127, 0, 0, 3]).await;
    assert!(closed, "a fourth connection in all was served");
    assert_eq!(second.nop(b"alive").await.unwrap(), b"alive");
    drop(first);
    // The server sees the close and gives the slot back.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut again = Initiator::connect(addr, &opts(3)).await.unwrap();
    assert_eq!(again.nop(b"again").await.unwrap(), b"again");
    let _ = tx.send(());
    server.await.unwrap().unwrap();
}
