//! Requests between submission and the frontier: the one in-flight tracker of the stream,
//! the recorder, the reader and the bench driver.
//!
//! # Protocol
//! [`InFlight::push`] numbers a request (numbers are consecutive, in submission order; a
//! caller puts the number in the request's `user_data` and finds it again from the
//! completion). Completions come in any order: [`InFlight::complete`] marks one done.
//! The *frontier* is the run of done requests at the front: [`InFlight::front`] shows the
//! oldest request held and whether it is done, and [`InFlight::pop_front`] lets it go, so
//! that a caller advances its frontier by popping while the front is done (and whatever
//! else its own rule asks, such as "did not fail"). A request stays reachable by its number
//! ([`InFlight::get`], [`InFlight::get_mut`]) until it is popped.
//!
//! The tracker is sized at creation and never shrinks; callers bound what they push (the
//! engine's queue depth, the pool), so the data path does not allocate.

use std::collections::VecDeque;

#[derive(Debug, Clone)]
struct Entry<T> {
    value: T,
    done: bool,
}

/// Requests in submission order, numbered; see the module documentation.
#[derive(Debug, Clone)]
pub struct InFlight<T> {
    entries: VecDeque<Entry<T>>,
    /// The number of `entries[0]`.
    front: u64,
}

impl<T> InFlight<T> {
    pub fn with_capacity(capacity: usize) -> InFlight<T> {
        InFlight {
            entries: VecDeque::with_capacity(capacity),
            front: 0,
        }
    }

    /// Holds `value` as the newest request and returns its number.
    pub fn push(&mut self, value: T) -> u64 {
        self.entries.push_back(Entry { value, done: false });
        self.front + self.entries.len() as u64 - 1
    }

    /// Requests held (pushed and not yet popped).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The number of the oldest request held (the next to be pushed when none is).
    pub fn front_number(&self) -> u64 {
        self.front
    }

    fn index(&self, number: u64) -> Option<usize> {
        number
            .checked_sub(self.front)
            .map(|index| index as usize)
            .filter(|&index| index < self.entries.len())
    }

    /// Request `number`, if it is still held.
    pub fn get(&self, number: u64) -> Option<&T> {
        self.index(number).map(|index| &self.entries[index].value)
    }

    pub fn get_mut(&mut self, number: u64) -> Option<&mut T> {
        self.index(number)
            .map(|index| &mut self.entries[index].value)
    }

    /// Whether request `number` is held and done.
    pub fn is_done(&self, number: u64) -> bool {
        self.index(number)
            .is_some_and(|index| self.entries[index].done)
    }

    /// Marks request `number` done and returns it (`None` if it is not held).
    pub fn complete(&mut self, number: u64) -> Option<&mut T> {
        let index = self.index(number)?;
        let entry = &mut self.entries[index];
        entry.done = true;
        Some(&mut entry.value)
    }

    /// The oldest request held, and whether it is done.
    pub fn front(&self) -> Option<(&T, bool)> {
        self.entries.front().map(|entry| (&entry.value, entry.done))
    }

    /// Lets the oldest request go, done or not.
    pub fn pop_front(&mut self) -> Option<T> {
        let entry = self.entries.pop_front()?;
        self.front += 1;
        Some(entry.value)
    }

    /// Every request held, oldest first: (number, request, done).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T, bool)> {
        let front = self.front;
        self.entries
            .iter()
            .enumerate()
            .map(move |(index, entry)| (front + index as u64, &entry.value, entry.done))
    }

    /// Every request held, oldest first, to change: (number, request, done).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut T, bool)> {
        let front = self.front;
        self.entries
            .iter_mut()
            .enumerate()
            .map(move |(index, entry)| (front + index as u64, &mut entry.value, entry.done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frontier_passes_only_a_done_front() {
        let mut flights = InFlight::with_capacity(4);
        let a = flights.push('a');
        let b = flights.push('b');
        let c = flights.push('c');
        assert_eq!((a, b, c), (0, 1, 2));
        flights.complete(c);
        flights.complete(b);
        assert_eq!(flights.front(), Some((&'a', false)), "a is not done yet");
        flights.complete(a);
        let mut passed = Vec::new();
        while let Some((_, true)) = flights.front() {
            passed.push(flights.pop_front().unwrap());
        }
        assert_eq!(passed, ['a', 'b', 'c'], "in submission order");
        assert!(flights.is_empty());
        assert_eq!(flights.push('d'), 3, "numbers go on");
    }

    #[test]
    fn requests_are_found_by_number_until_popped() {
        let mut flights = InFlight::with_capacity(2);
        let a = flights.push(10);
        let b = flights.push(20);
        *flights.get_mut(b).unwrap() += 1;
        assert_eq!(flights.get(b), Some(&21));
        assert!(!flights.is_done(a));
        flights.complete(a);
        assert!(flights.is_done(a));
        flights.pop_front();
        assert_eq!(flights.get(a), None, "popped");
        assert_eq!(flights.complete(a), None);
        assert_eq!(flights.front_number(), b);
        let held: Vec<(u64, i32, bool)> = flights.iter().map(|(n, v, d)| (n, *v, d)).collect();
        assert_eq!(held, [(b, 21, false)]);
        assert_eq!(flights.get(99), None);
    }
}
