package redisstate

// Reading ahead on a retry. A transaction answers at one server time, its
// now, fixed by its first read; a key read later and found absent may have
// expired after now, while the file engine would still count it live then,
// so the attempt must start over when an answer it gave holds only at the
// present now (a lease granted, say; tx.saw). Every read is a round trip:
// on a loaded machine, or across a cluster, a callback that grants a lease
// and then reads a missing key spans a millisecond of server time nearly
// every time, and the retries met the same fate until Update gave up with
// ErrBusy. So an attempt that starts over first reads, in one round trip,
// every key the attempts before it asked for: the callback's reads of them
// then find them known, at the attempt's now. A callback that reads the
// same keys each time commits by the second attempt; one whose keys depend
// on what it read converges as they stop changing.

// readAhead reads (and WATCHes) rkeys, Redis keys, in one round trip, as
// the callback's own first reads of them would. A key a retried attempt no
// longer reads is only watched needlessly: a change to it costs at most one
// more attempt.
func (t *tx) readAhead(rkeys []string) error {
	if len(rkeys) == 0 {
		return nil
	}
	if err := t.bind(rkeys[0], rkeys[0]); err != nil {
		return err
	}
	res, err := t.watchAndRead(rkeys)
	if err != nil {
		return err
	}
	for i, rkey := range rkeys {
		if err := t.loaded(rkey, res[i]); err != nil {
			return err
		}
	}
	return nil
}
