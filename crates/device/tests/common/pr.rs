//! PERSISTENT RESERVE OUT and IN run through a target (SPC-4 §6.15, §6.16), with the scsi
//! crate's parameter list encoder and parameter data decoders.

use super::{run, TargetExt};
use device::{Completion, Nexus, Target, Transfer};
use scsi::persistent_reserve::{
    decode_read_keys, decode_read_reservation, PrInAction, PrOutAction, PrOutParameters,
    ReservationType,
};

/// A PERSISTENT RESERVE OUT CDB (SPC-4 table 212): `action`, SCOPE and TYPE byte `scope_type`,
/// a `len`-byte parameter list.
pub fn pr_out_cdb(action: PrOutAction, scope_type: u8, len: usize) -> [u8; 10] {
    let len = u32::try_from(len).unwrap().to_be_bytes();
    [
        0x5F,
        action.code(),
        scope_type,
        0,
        0,
        len[0],
        len[1],
        len[2],
        len[3],
        0,
    ]
}

/// PERSISTENT RESERVE OUT `action` of reservation type `kind` (LU scope) with `list`, which
/// the target asks for whole first.
pub fn pr_out(
    t: &Target,
    n: &Nexus,
    action: PrOutAction,
    kind: Option<ReservationType>,
    list: PrOutParameters,
) -> Completion {
    let list = list.encode();
    let cdb = pr_out_cdb(action, kind.map_or(0, ReservationType::code), list.len());
    assert_eq!(t.transfer(n, 0, &cdb), Ok(Transfer::Out(list.len() as u32)));
    run(t, n, &cdb, &list).0
}

/// PERSISTENT RESERVE IN `action`'s parameter data, which must come GOOD.
pub fn pr_in(t: &Target, n: &Nexus, action: PrInAction) -> Vec<u8> {
    let cdb = [0x5E, action.code(), 0, 0, 0, 0, 0, 0x10, 0, 0];
    let (c, data) = run(t, n, &cdb, &[]);
    assert_eq!(c, Completion::GOOD, "PERSISTENT RESERVE IN {action:?}");
    data
}

/// PRgeneration and the keys of READ KEYS.
pub fn keys(t: &Target, n: &Nexus) -> (u32, Vec<u64>) {
    let k = decode_read_keys(&pr_in(t, n, PrInAction::ReadKeys)).expect("READ KEYS data");
    (k.generation, k.keys)
}

/// The reservation's key and type, from READ RESERVATION.
pub fn reservation(t: &Target, n: &Nexus) -> Option<(u64, ReservationType)> {
    let d = pr_in(t, n, PrInAction::ReadReservation);
    decode_read_reservation(&d)
        .expect("READ RESERVATION data")
        .reservation
}
