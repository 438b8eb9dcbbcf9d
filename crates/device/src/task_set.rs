//! The task set of a logical unit (SAM-5 §4.6.x task sets, §8.6 task attributes): every
//! task from its arrival to its end, whatever it waits for. It keeps the tags in use
//! (overlapped commands, ABORT TASK), holds tasks back behind ORDERED ones and releases them
//! in order. What a task does is the core's business; this is only where tasks are and in
//! which order they may go. Pure: no time, no I/O.

use crate::event::TaskId;
use crate::TaskAttribute;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::VecDeque;

/// One slot of the task set: the task in it, and how many tasks it has held.
struct Slot<T> {
    generation: u32,
    task: Option<Entered<T>>,
}

/// A task in the set, with its place in the ordering.
struct Entered<T> {
    nexus: u64,
    tag: u64,
    ordered: bool,
    /// Held back by an older task (SAM-5 §8.6.3): in `held`, not counted as enabled.
    held: bool,
    /// Its tag still names it: false once task management aborted it while its data-plane
    /// operation runs on (the slot lives until the operation ends; the tag is free).
    tagged: bool,
    task: T,
}

/// The tasks of one logical unit.
pub(crate) struct TaskSet<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    /// (nexus, tag) of every tagged task: overlapped commands and ABORT TASK.
    by_tag: FxHashMap<(u64, u64), u32>,
    /// Tasks held back by an ORDERED task, in arrival order.
    held: VecDeque<u32>,
    /// Tasks entered and not held, and the ORDERED ones among them.
    enabled: usize,
    ordered_enabled: usize,
    /// Changes since the set was made: the full invariant check runs on a sample of them.
    changes: u64,
}

impl<T> Default for TaskSet<T> {
    fn default() -> Self {
        TaskSet {
            slots: Vec::new(),
            free: Vec::new(),
            by_tag: FxHashMap::default(),
            held: VecDeque::new(),
            enabled: 0,
            ordered_enabled: 0,
            changes: 0,
        }
    }
}

/// Why a task could not enter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overlapped;

impl<T> TaskSet<T> {
    /// Tasks in the set whose tag still names them.
    pub(crate) fn len(&self) -> usize {
        self.by_tag.len()
    }

    /// Whether the nexus has a task with this tag (an overlapped command, SAM-5 §5.10).
    pub(crate) fn tag_in_use(&self, nexus: u64, tag: u64) -> bool {
        self.by_tag.contains_key(&(nexus, tag))
    }

    /// The task the nexus's tag names.
    pub(crate) fn find(&self, nexus: u64, tag: u64) -> Option<TaskId> {
        let slot = *self.by_tag.get(&(nexus, tag))?;
        Some(self.id(slot))
    }

    fn id(&self, slot: u32) -> TaskId {
        let generation = self.slots.get(slot as usize).map_or(0, |s| s.generation);
        TaskId { slot, generation }
    }

    /// Whether a task with `attribute` arriving now must wait for older tasks (SAM-5 §8.6:
    /// an ORDERED task waits for every older task, every task waits for an older ORDERED one,
    /// a HEAD OF QUEUE task waits for none).
    pub(crate) fn must_wait(&self, attribute: TaskAttribute) -> bool {
        match attribute {
            TaskAttribute::HeadOfQueue => false,
            TaskAttribute::Ordered => self.enabled > 0 || !self.held.is_empty(),
            TaskAttribute::Simple | TaskAttribute::Aca => {
                self.ordered_enabled > 0 || !self.held.is_empty()
            }
        }
    }

    /// A task enters; held back when [`Self::must_wait`]. Fails when its tag is in use.
    /// Inlined, so that the task is built where it goes rather than moved there.
    #[inline]
    pub(crate) fn enter(
        &mut self,
        nexus: u64,
        tag: u64,
        attribute: TaskAttribute,
        task: T,
    ) -> Result<TaskId, Overlapped> {
        let held = self.must_wait(attribute);
        let vacant = match self.by_tag.entry((nexus, tag)) {
            MapEntry::Occupied(_) => return Err(Overlapped),
            MapEntry::Vacant(v) => v,
        };
        let ordered = attribute == TaskAttribute::Ordered;
        let entered = Entered {
            nexus,
            tag,
            ordered,
            held,
            tagged: true,
            task,
        };
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    task: None,
                });
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let s = &mut self.slots[slot as usize];
        debug_assert!(s.task.is_none(), "a free slot is empty");
        s.task = Some(entered);
        vacant.insert(slot);
        if held {
            self.held.push_back(slot);
        } else {
            self.enabled += 1;
            self.ordered_enabled += usize::from(ordered);
        }
        self.check();
        Ok(self.id(slot))
    }

    fn entered(&self, id: TaskId) -> Option<&Entered<T>> {
        let s = self.slots.get(id.slot as usize)?;
        (s.generation == id.generation)
            .then_some(s.task.as_ref())
            .flatten()
    }

    fn entered_mut(&mut self, id: TaskId) -> Option<&mut Entered<T>> {
        let s = self.slots.get_mut(id.slot as usize)?;
        (s.generation == id.generation)
            .then_some(s.task.as_mut())
            .flatten()
    }

    pub(crate) fn get(&self, id: TaskId) -> Option<&T> {
        self.entered(id).map(|e| &e.task)
    }

    pub(crate) fn get_mut(&mut self, id: TaskId) -> Option<&mut T> {
        self.entered_mut(id).map(|e| &mut e.task)
    }

    /// A task with its nexus and tag, in one look.
    pub(crate) fn owned(&self, id: TaskId) -> Option<(u64, u64, &T)> {
        self.entered(id).map(|e| (e.nexus, e.tag, &e.task))
    }

    /// [`Self::owned`], to change the task.
    pub(crate) fn owned_mut(&mut self, id: TaskId) -> Option<(u64, u64, &mut T)> {
        self.entered_mut(id).map(|e| (e.nexus, e.tag, &mut e.task))
    }

    /// The nexus and tag of a task.
    pub(crate) fn owner(&self, id: TaskId) -> Option<(u64, u64)> {
        self.entered(id).map(|e| (e.nexus, e.tag))
    }

    /// Whether the task is held back by an older one.
    pub(crate) fn is_held(&self, id: TaskId) -> bool {
        self.entered(id).is_some_and(|e| e.held)
    }

    /// Whether task management took the task's tag away while its operation runs on.
    pub(crate) fn is_aborted(&self, id: TaskId) -> bool {
        self.entered(id).is_some_and(|e| !e.tagged)
    }

    /// The task left the set; tasks it held back are released (see [`Self::release`]).
    pub(crate) fn remove(&mut self, id: TaskId) -> Option<T> {
        let e = self.leave(id)?.take()?;
        self.check();
        Some(e.task)
    }

    /// [`Self::remove`], for a caller that only reads the task on its way out: `f` sees it
    /// where it is, and it is dropped there (a task is too big to move for nothing).
    pub(crate) fn remove_with<R>(&mut self, id: TaskId, f: impl FnOnce(&T) -> R) -> Option<R> {
        let slot = self.leave(id)?;
        let r = f(&slot.as_ref()?.task);
        *slot = None;
        self.check();
        Some(r)
    }

    /// Takes the task's place in the ordering and its tag away; its slot, still holding it,
    /// is free for the next task once the caller empties it.
    fn leave(&mut self, id: TaskId) -> Option<&mut Option<Entered<T>>> {
        let s = self.slots.get_mut(id.slot as usize)?;
        if s.generation != id.generation {
            return None;
        }
        let e = s.task.as_ref()?;
        let (key, tagged, held, ordered) = ((e.nexus, e.tag), e.tagged, e.held, e.ordered);
        s.generation = s.generation.wrapping_add(1);
        self.free.push(id.slot);
        if tagged {
            self.by_tag.remove(&key);
        }
        if held {
            if let Some(i) = self.held.iter().position(|&h| h == id.slot) {
                self.held.remove(i);
            }
        } else {
            self.enabled -= 1;
            self.ordered_enabled -= usize::from(ordered);
        }
        Some(&mut self.slots[id.slot as usize].task)
    }

    /// Task management aborts a task whose data-plane operation is running: its tag is free
    /// at once (the initiator may reuse it), and it stays in its slot, enabled, until the
    /// operation ends and [`Self::remove`] takes it.
    pub(crate) fn untag(&mut self, id: TaskId) {
        let Some(e) = self.entered_mut(id) else {
            return;
        };
        if !std::mem::replace(&mut e.tagged, false) {
            return;
        }
        let key = (e.nexus, e.tag);
        self.by_tag.remove(&key);
        self.check();
    }

    /// Whether any task is held back (most of the time none is).
    #[inline]
    pub(crate) fn holds_any(&self) -> bool {
        !self.held.is_empty()
    }

    /// Releases held tasks that no longer have to wait, oldest first; returns them.
    pub(crate) fn release(&mut self, out: &mut Vec<TaskId>) {
        while let Some(&slot) = self.held.front() {
            let Some(e) = self.slots.get(slot as usize).and_then(|s| s.task.as_ref()) else {
                debug_assert!(false, "a held slot holds a task");
                self.held.pop_front();
                continue;
            };
            let blocked = if e.ordered {
                self.enabled > 0
            } else {
                self.ordered_enabled > 0
            };
            if blocked {
                break;
            }
            self.held.pop_front();
            let ordered = e.ordered;
            if let Some(e) = self.slots[slot as usize].task.as_mut() {
                e.held = false;
            }
            self.enabled += 1;
            self.ordered_enabled += usize::from(ordered);
            out.push(self.id(slot));
        }
        self.check();
    }

    /// The tagged tasks of the nexuses `which` selects, in slot order.
    pub(crate) fn of(&self, which: impl Fn(u64) -> bool) -> Vec<TaskId> {
        (0u32..)
            .zip(&self.slots)
            .filter_map(|(slot, s)| {
                let e = s.task.as_ref()?;
                (e.tagged && which(e.nexus)).then_some(TaskId {
                    slot,
                    generation: s.generation,
                })
            })
            .collect()
    }

    /// The set's invariants (TigerBeetle style, in debug builds): the tag map names exactly
    /// the tagged tasks, the held queue exactly the held ones, and the enabled counts match
    /// the tasks that are not held. The counts are checked on every change; the full scan on
    /// every change of a small set and on every 64th of a large one, so the simulator's
    /// millions of commands in the tests exercise it without a scan per command.
    fn check(&mut self) {
        if !cfg!(debug_assertions) {
            return;
        }
        self.changes += 1;
        debug_assert!(self.ordered_enabled <= self.enabled);
        debug_assert!(self.by_tag.len() <= self.enabled + self.held.len());
        debug_assert_eq!(
            self.slots.len() - self.free.len(),
            self.enabled + self.held.len(),
            "every slot is free or holds a task"
        );
        if self.slots.len() > 16 && !self.changes.is_multiple_of(64) {
            return;
        }
        let mut tagged = 0;
        let mut held = 0;
        let mut enabled = 0;
        let mut ordered = 0;
        for (slot, s) in (0u32..).zip(&self.slots) {
            let Some(e) = &s.task else { continue };
            if e.tagged {
                tagged += 1;
                debug_assert_eq!(self.by_tag.get(&(e.nexus, e.tag)), Some(&slot));
            }
            if e.held {
                held += 1;
                debug_assert!(self.held.contains(&slot));
            } else {
                enabled += 1;
                ordered += usize::from(e.ordered);
            }
        }
        debug_assert_eq!(tagged, self.by_tag.len(), "tag map");
        debug_assert_eq!(held, self.held.len(), "held queue");
        debug_assert_eq!(enabled, self.enabled, "enabled count");
        debug_assert_eq!(ordered, self.ordered_enabled, "ordered count");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> TaskSet<&'static str> {
        TaskSet::default()
    }

    #[test]
    fn ordered_waits_for_older_tasks_and_holds_younger_ones() {
        let mut s = set();
        let a = s.enter(1, 1, TaskAttribute::Simple, "a").unwrap();
        let o = s.enter(1, 2, TaskAttribute::Ordered, "o").unwrap();
        let b = s.enter(2, 1, TaskAttribute::Simple, "b").unwrap();
        let h = s.enter(2, 2, TaskAttribute::HeadOfQueue, "h").unwrap();
        assert!(!s.is_held(a) && s.is_held(o) && s.is_held(b) && !s.is_held(h));
        let mut out = Vec::new();
        s.remove(a);
        s.release(&mut out);
        assert!(out.is_empty(), "the HEAD OF QUEUE task still runs");
        s.remove(h);
        s.release(&mut out);
        assert_eq!(out, [o], "the ORDERED task goes alone");
        out.clear();
        s.remove(o);
        s.release(&mut out);
        assert_eq!(out, [b]);
    }

    #[test]
    fn tags_overlap_until_the_task_leaves_or_is_untagged() {
        let mut s = set();
        let a = s.enter(1, 7, TaskAttribute::Simple, "a").unwrap();
        assert_eq!(s.enter(1, 7, TaskAttribute::Simple, "b"), Err(Overlapped));
        assert!(
            s.enter(2, 7, TaskAttribute::Simple, "c").is_ok(),
            "another nexus"
        );
        s.untag(a);
        assert!(s.is_aborted(a) && s.get(a).is_some());
        let again = s.enter(1, 7, TaskAttribute::Simple, "d").unwrap();
        assert_ne!(again, a);
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.remove(a), None, "a stale id names nothing");
        assert_eq!(s.find(1, 7), Some(again));
    }

    #[test]
    fn a_reused_slot_has_a_new_generation() {
        let mut s = set();
        let a = s.enter(1, 1, TaskAttribute::Simple, "a").unwrap();
        s.remove(a);
        let b = s.enter(1, 1, TaskAttribute::Simple, "b").unwrap();
        assert_eq!(a.slot, b.slot);
        assert!(s.get(a).is_none());
        assert_eq!(s.get(b), Some(&"b"));
    }
}
