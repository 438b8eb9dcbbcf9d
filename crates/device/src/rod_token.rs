//! Token-based copy offload (SBC-4, the ODX model): POPULATE TOKEN makes a ROD token that
//! represents ranges of this logical unit, WRITE USING TOKEN writes what a token represents
//! into ranges of this logical unit (from this or any other of the process's), and RECEIVE ROD
//! TOKEN INFORMATION returns the token. Tokens are access upon reference: the data is read
//! when used, and a write to the represented blocks first revokes the token.

use crate::extended_copy::{CopyJob, CopyLists, Endpoint, Here};
use crate::{Completion, Nexus, Ns};
use scsi::third_party_copy::{self as tpc, CopyResult, CscdDescriptor, ExtendedCopy, Range};
use scsi::{Asc, Sense, SenseKey};

/// The byte extents of `ranges` on a unit of `block_size`.
fn extents(ranges: &[Range], block_size: u32) -> Vec<(u64, u64)> {
    let bs = u64::from(block_size);
    ranges
        .iter()
        .map(|r| (r.lba * bs, u64::from(r.blocks) * bs))
        .collect()
}

/// Every range inside the capacity, else LBA OUT OF RANGE (SBC-4); the blocks they hold.
fn check_ranges(here: &Here, ranges: &[Range]) -> Result<u64, Sense> {
    let mut blocks = 0u64;
    for r in ranges {
        match r.lba.checked_add(u64::from(r.blocks)) {
            Some(end) if end <= here.blocks => blocks += u64::from(r.blocks),
            _ => return Err(Sense::lba_out_of_range()),
        }
    }
    Ok(blocks)
}

/// This logical unit as a CSCD descriptor names it (its NAA designator).
fn own_cscd(here: &Here) -> CscdDescriptor {
    CscdDescriptor {
        code_set: 0x01,
        designator_type: 0x03,
        association: 0,
        designator: here.identifiers.naa.to_vec(),
        block_length: here.block_size,
    }
}

fn check(sense: Sense) -> Completion {
    Completion::check_condition(sense)
}

/// POPULATE TOKEN (SBC-4) at `now`: the ranges are checked, the token is made and held under
/// the CDB's LIST IDENTIFIER for RECEIVE ROD TOKEN INFORMATION.
pub(crate) fn populate_token(
    now: Ns,
    here: &Here,
    copies: &mut CopyLists,
    nexus: u64,
    x: &ExtendedCopy,
    p: &[u8],
) -> Completion {
    let pt = match tpc::parse_populate_token(p) {
        Ok(pt) => pt,
        Err(sense) => return check(sense),
    };
    let blocks = match check_ranges(here, &pt.ranges) {
        Ok(b) => b,
        Err(sense) => return check(sense),
    };
    let Some(manager) = here.manager else {
        // A logical unit outside any target (the simulator's) keeps no tokens.
        return check(Sense::invalid_command_operation_code());
    };
    if let Err(busy) = copies.begin(nexus, x.list_identifier) {
        return busy;
    }
    let timeout = match pt.inactivity_timeout {
        0 => tpc::DEFAULT_INACTIVITY_TIMEOUT,
        t => t,
    };
    let bytes = blocks * u64::from(here.block_size);
    let token = manager.create_token(now, own_cscd(here), pt.ranges, bytes, timeout);
    let mut result = CopyResult::new(tpc::out_action::POPULATE_TOKEN);
    result.transfer_count = blocks;
    result.rod_token = Some(token);
    copies.end(nexus, x.list_identifier, result);
    Completion::GOOD
}

/// WRITE USING TOKEN (SBC-4) at `now`: the token's data from OFFSET INTO ROD fills the ranges
/// in order, chunk by chunk; a token that represents less fills less (the transfer count says
/// how much). The block device zero token writes zeros. The copy job, or the status it ends
/// with before any data moves.
pub(crate) fn write_using_token(
    now: Ns,
    here: &Here,
    copies: &mut CopyLists,
    nexus: &Nexus,
    x: &ExtendedCopy,
    p: &[u8],
) -> Result<CopyJob, Completion> {
    let wut = tpc::parse_write_using_token(p).map_err(check)?;
    if here.write_protected {
        return Err(check(Sense::new(
            SenseKey::DataProtect,
            Asc::WRITE_PROTECTED,
        )));
    }
    check_ranges(here, &wut.ranges).map_err(check)?;
    let rod_type = tpc::token_type(&wut.token).map_err(check)?;
    // Failures from here on are the copy's: its result is kept for RECEIVE COPY RESULTS.
    let mut failure = None;
    let (source, from) = if rod_type == tpc::ROD_TYPE_BLOCK_DEVICE_ZERO {
        (Endpoint::This, None)
    } else {
        let manager = here
            .manager
            .ok_or_else(|| check(Sense::new(SenseKey::IllegalRequest, tpc::TOKEN_UNKNOWN)))?;
        let data = manager
            .use_token(now, &wut.token, wut.delete_token)
            .map_err(check)?;
        let (unit, block_size) = if here.designated_by(&data.source) {
            (Endpoint::This, here.block_size)
        } else {
            match manager.find(&data.source) {
                Some(view) => {
                    if !view.reachable(nexus, false) {
                        failure = Some(Sense::new(
                            SenseKey::CopyAborted,
                            tpc::COPY_TARGET_DEVICE_NOT_REACHABLE,
                        ));
                    }
                    let bs = view.block_size;
                    (Endpoint::Other(view), bs)
                }
                // The unit it represents is gone: the token is of no use any more.
                None => {
                    return Err(check(Sense::new(
                        SenseKey::IllegalRequest,
                        tpc::TOKEN_REVOKED,
                    )))
                }
            }
        };
        let mut from = extents(&data.ranges, block_size);
        // Skip OFFSET INTO ROD blocks (of this unit's size) of the token's data.
        let mut skip = wut.offset_into_rod.saturating_mul(here.block_size.into());
        while skip > 0 && !from.is_empty() {
            let take = skip.min(from[0].1);
            from[0].0 += take;
            from[0].1 -= take;
            skip -= take;
            if from[0].1 == 0 {
                from.remove(0);
            }
        }
        if from.is_empty() && failure.is_none() {
            failure = Some(Sense::invalid_field_in_parameter_list(8, None));
        }
        (unit, Some(from))
    };
    copies.begin(nexus.id, x.list_identifier)?;
    if let Some(sense) = failure {
        let mut result = CopyResult::new(tpc::out_action::WRITE_USING_TOKEN);
        result.status = tpc::CopyStatus::Failed;
        result.sense = Some(sense.clone());
        copies.end(nexus.id, x.list_identifier, result);
        return Err(check(sense));
    }
    let to = extents(&wut.ranges, here.block_size);
    Ok(CopyJob::token(
        nexus.id,
        x.list_identifier,
        source,
        from,
        to,
        here.block_size,
        copies,
    ))
}
