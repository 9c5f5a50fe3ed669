package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// The checker counts deliveries of a record delivered before that do not
// carry kinesis_redelivered "true" (issue 36: "no record that was
// delivered before arrives without the mark"), and the table and the soak's
// verdict fail on any.
func TestCheckCountsUnmarkedDuplicates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// One record per delivery unless a case repeats one: k0/c on shard s0
	// at sequence c.
	d := func(c int, inst string, ms int, redelivered, attempt string) Delivery {
		return Delivery{K: "k0", C: c, Shard: "s0", Seq: fmt.Sprint(c), Inst: inst, At: t0.Add(time.Duration(ms) * time.Millisecond),
			Redelivered: redelivered, Attempt: attempt}
	}
	for _, tc := range []struct {
		name       string
		deliveries []Delivery
		want       Marks
	}{
		{"a re-read after a kill, marked", []Delivery{d(1, "a1", 0, "false", "1"), d(2, "a1", 10, "false", "1"), d(2, "b1", 3000, "true", "1")},
			Marks{Marked: 1, MaxAttempt: 1}},
		{"a re-read after a kill, unmarked", []Delivery{d(1, "a1", 0, "false", "1"), d(2, "a1", 10, "false", "1"), d(2, "b1", 3000, "false", "1")},
			Marks{UnmarkedDups: 1, UnmarkedSure: 1, MaxAttempt: 1}},
		{"a nack redelivered by the same instance, marked", []Delivery{d(1, "a1", 0, "false", "1"), d(1, "a1", 500, "true", "2")},
			Marks{Marked: 1, MaxAttempt: 2}},
		{"a nack redelivered without the mark", []Delivery{d(1, "a1", 0, "false", "1"), d(1, "a1", 500, "false", "2")},
			Marks{UnmarkedDups: 1, UnmarkedSure: 1, MaxAttempt: 2}},
		// The promise is one-sided: a mark on a first delivery is allowed.
		{"a first delivery marked", []Delivery{d(1, "b1", 0, "true", "1"), d(2, "b1", 10, "false", "1")},
			Marks{Marked: 1, MarkedFirst: 1, MaxAttempt: 1}},
		// The input sets the key only on marked records.
		{"no mark at all", []Delivery{d(1, "a1", 0, "", ""), d(1, "b1", 3000, "", "")},
			Marks{UnmarkedDups: 1, UnmarkedSure: 1, Unset: 2}},
		// The later stamp is unmarked: counted, but not "whatever the order
		// of the stamps" (a busy pipeline may stamp late).
		{"unmarked after a marked one", []Delivery{d(1, "b1", 100, "true", "1"), d(1, "a1", 200, "false", "1")},
			Marks{UnmarkedDups: 1, Marked: 1, MarkedFirst: 1, MaxAttempt: 1}},
		{"two unmarked whatever the stamps", []Delivery{d(1, "b1", 100, "true", "1"), d(1, "a1", 200, "false", "1"), d(1, "c1", 300, "false", "1")},
			Marks{UnmarkedDups: 2, UnmarkedSure: 1, Marked: 1, MarkedFirst: 1, MaxAttempt: 1}},
		// Given out of order: the checker orders by time.
		{"files read out of time order", []Delivery{d(1, "b1", 3000, "true", "1"), d(1, "a1", 0, "false", "1")},
			Marks{Marked: 1, MaxAttempt: 1}},
		{"user records of one aggregate and equal sequences of two shards are distinct records", []Delivery{
			{K: "k0", C: 1, Shard: "st/s0", Seq: "7/0", Inst: "a1", At: t0, Redelivered: "false", Attempt: "1"},
			{K: "k0", C: 2, Shard: "st/s0", Seq: "7/1", Inst: "a1", At: t0.Add(time.Millisecond), Redelivered: "false", Attempt: "1"},
			{K: "k1", C: 1, Shard: "st/s1", Seq: "7/0", Inst: "a1", At: t0.Add(2 * time.Millisecond), Redelivered: "false", Attempt: "1"},
		}, Marks{MaxAttempt: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var problems []string
			got := countMarks(sortedByTime(tc.deliveries), nil, func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) })
			assert.Equal(t, tc.want.UnmarkedDups, groupedCount(got.Groups), "every unmarked duplicate is in a group")
			got.Groups = nil
			assert.Equal(t, tc.want, got)
			assert.Len(t, problems, tc.want.UnmarkedDups, "one example per unmarked duplicate")

			// Through the checker: the table and the soak's verdict.
			stream := []Record{}
			perKey := map[string]int{}
			for _, dl := range tc.deliveries {
				if !containsRecord(stream, dl) {
					stream = append(stream, Record{Shard: dl.Shard, Seq: dl.Seq, K: dl.K, C: dl.C})
					perKey[dl.K] = max(perKey[dl.K], dl.C)
				}
			}
			everywhere := []Window{{What: "any", From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}}
			tab := Check(perKey, stream, append([]Delivery(nil), tc.deliveries...), everywhere, nil, nil)
			marks := tab.Marks
			marks.Groups = nil
			assert.Equal(t, tc.want, marks)
			assert.Equal(t, tc.want.UnmarkedDups == 0, tab.OK(), tab.String())
			assert.Contains(t, tab.String(), fmt.Sprintf("unmarked duplicates (no kinesis_redelivered: true)  %d (", tc.want.UnmarkedDups))
			v := Verdict{Table: tab}
			assert.Equal(t, tc.want.UnmarkedDups == 0, v.Pass())
			assert.Contains(t, v.Line(), fmt.Sprintf(" unmarked_duplicates=%d ", tc.want.UnmarkedDups))
			if tc.want.UnmarkedDups > 0 {
				assert.Contains(t, strings.Join(tab.Problems, "\n"), "unmarked duplicate: k0/")
			}
		})
	}
}

func groupedCount(gs []MarkGroup) int {
	n := 0
	for _, g := range gs {
		n += g.Count
	}
	return n
}

// A long run's unmarked duplicates are many; the report groups them by
// shard and by the incarnations that delivered them first and again, the
// largest group first, so the report says where to look.
func TestCountMarksGroupsUnmarkedDuplicates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ds []Delivery
	add := func(shard string, c int, inst string, ms int, redelivered string) {
		ds = append(ds, Delivery{K: "k0", C: c, Shard: shard, Seq: fmt.Sprint(c), Inst: inst, At: t0.Add(time.Duration(ms) * time.Millisecond), Redelivered: redelivered, Attempt: "1"})
	}
	for c := 1; c <= 3; c++ {
		add("st/s0", c, "a1", c, "")
		add("st/s0", c, "b2", 1000+c, "") // three unmarked, a1 then b2
	}
	add("st/s1", 1, "a1", 5, "")
	add("st/s1", 1, "c3", 2000, "")     // one unmarked
	add("st/s1", 1, "c4", 3000, "true") // marked: not a group
	m := countMarks(sortedByTime(ds), nil, func(string, ...any) {})
	require.Len(t, m.Groups, 2)
	assert.Equal(t, MarkGroup{Shard: "st/s0", First: "a1", Again: "b2", Count: 3, Example: "k0/1 at 00:00:00.001, again at 00:00:01.001"}, m.Groups[0])
	assert.Equal(t, "st/s1", m.Groups[1].Shard)
	assert.Equal(t, 1, m.Groups[1].Count)
	assert.Contains(t, m.String(), "largest groups: 3 of st/s0 by a1 then b2 (first: k0/1 at 00:00:00.001, again at 00:00:01.001); 1 of st/s1 by a1 then c3")
}

func sortedByTime(ds []Delivery) []Delivery {
	out := append([]Delivery(nil), ds...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].At.Before(out[j-1].At); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func containsRecord(rs []Record, d Delivery) bool {
	for _, r := range rs {
		if r.Shard == d.Shard && r.Seq == d.Seq {
			return true
		}
	}
	return false
}

// The chaos and soak instances record each message's redelivery mark and
// attempt in their delivery lines, which the checker reads: without them
// every duplicate would count as unmarked. An input that sets neither
// still gives a line the checker reads. What their dead letter writes is
// read as a record given up, with its reason.
func TestDeliveryMappingsRecordTheMark(t *testing.T) {
	for name, mapping := range map[string]string{"chaos": chaosMapping("a1"), "soak": soakMapping("a1")} {
		t.Run(name, func(t *testing.T) {
			var conf struct {
				Resources []struct {
					Processors []struct {
						Mapping string `yaml:"mapping"`
					} `yaml:"processors"`
				} `yaml:"output_resources"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(instanceOutput(mapping, "file: { path: out.jsonl }", "dlq.jsonl", "poison.jsonl", "3")), &conf))
			require.Len(t, conf.Resources, 1)
			require.Len(t, conf.Resources[0].Processors, 1)
			for _, tc := range []struct {
				deadLetter           bool
				meta                 map[string]any
				redelivered, attempt string
			}{
				{false, map[string]any{"kinesis_redelivered": "true", "kinesis_delivery_attempt": "3"}, "true", "3"},
				{false, map[string]any{"kinesis_redelivered": "false", "kinesis_delivery_attempt": "1"}, "false", "1"},
				{false, map[string]any{"kinesis_redelivered": true, "kinesis_delivery_attempt": 2}, "true", "2"},
				{false, map[string]any{}, "", ""},
				{true, map[string]any{"kinesis_delivery_attempt": "3", "kinesis_dead_letter_reason": "max_attempts"}, "", "3"},
			} {
				m := mapping
				if tc.deadLetter {
					m = conf.Resources[0].Processors[0].Mapping
				}
				exe, err := bloblang.Parse(m)
				require.NoError(t, err)
				msg := service.NewMessage([]byte(`{"k":"k0","c":7,"poison":true}`))
				for k, v := range map[string]any{"kinesis_stream": "st", "kinesis_shard": "shardId-0", "kinesis_sequence_number": "42"} {
					msg.MetaSetMut(k, v)
				}
				for k, v := range tc.meta {
					msg.MetaSetMut(k, v)
				}
				out, err := msg.BloblangQuery(exe)
				require.NoError(t, err, "%v", tc.meta)
				b, err := out.AsBytes()
				require.NoError(t, err)
				ds, err := parseDeliveries(strings.NewReader(string(b) + "\n"))
				require.NoError(t, err)
				require.Len(t, ds, 1, "the checker reads the line %s", b)
				assert.Equal(t, tc.redelivered, ds[0].Redelivered, "%v", tc.meta)
				assert.Equal(t, tc.attempt, ds[0].Attempt, "%v", tc.meta)
				assert.True(t, ds[0].Poison, "%s", b)
				assert.Equal(t, "k0", ds[0].K)
				if tc.deadLetter {
					assert.Equal(t, "max_attempts", ds[0].DeadLetterReason, "a dead letter's line is a record given up")
				} else {
					assert.Empty(t, ds[0].DeadLetterReason, "a delivery")
				}
			}
		})
	}
}

// A poison record the inputs gave up and wrote to their dead letter is
// done, not lost; a good record in the dead letter fails the run (issue
// 36: only records that keep failing are given up).
func TestCheckCountsDeadLetteredPoisonAsDone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stream := []Record{
		{Shard: "s0", Seq: "1", K: "k0", C: 1}, {Shard: "s0", Seq: "2", K: "k0", C: 2, Poison: true}, {Shard: "s0", Seq: "3", K: "k0", C: 3},
	}
	perKey := map[string]int{"k0": 3}
	d := func(seq string, c, ms int, reason string) Delivery {
		attempt := "1"
		if reason != "" {
			attempt = "3"
		}
		return Delivery{K: "k0", C: c, Shard: "s0", Seq: seq, Inst: "a1", At: t0.Add(time.Duration(ms) * time.Millisecond),
			Redelivered: "false", Attempt: attempt, Poison: c == 2, DeadLetterReason: reason}
	}
	for _, tc := range []struct {
		name                                          string
		deliveries                                    []Delivery
		ok                                            bool
		lost, endToEndLost, dead, deadGood, delivered int
	}{
		{"poison dead-lettered", []Delivery{d("1", 1, 0, ""), d("2", 2, 900, "max_attempts"), d("3", 3, 1000, "")}, true, 0, 0, 1, 0, 2},
		// Written again by the next owner after a kill before the commit.
		{"poison dead-lettered twice", []Delivery{d("1", 1, 0, ""), d("2", 2, 900, "max_attempts"), d("2", 2, 5000, "max_attempts"), d("3", 3, 5100, "")}, true, 0, 0, 1, 0, 2},
		{"poison never dead-lettered is lost", []Delivery{d("1", 1, 0, ""), d("3", 3, 1000, "")}, false, 1, 1, 0, 0, 2},
		{"a good record dead-lettered", []Delivery{d("1", 1, 0, ""), d("2", 2, 900, "max_attempts"), d("3", 3, 1000, "max_record_age")}, false, 0, 0, 2, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := Check(perKey, stream, tc.deliveries, nil, nil, nil)
			assert.Equal(t, tc.ok, tab.OK(), tab.String())
			assert.Equal(t, 1, tab.Poison)
			assert.Equal(t, tc.lost, tab.InputLost, "lost")
			assert.Equal(t, tc.endToEndLost, tab.EndToEndLost, "end-to-end lost")
			assert.Equal(t, tc.dead, tab.DeadLettered, "dead-lettered")
			assert.Equal(t, tc.deadGood, tab.DeadLetteredGood, "good records dead-lettered")
			assert.Equal(t, tc.delivered, tab.DeliveredUnique, "a dead letter's line is not a delivery")
			assert.Zero(t, tab.Duplicates, "a record dead-lettered twice is not a duplicate delivery")
			assert.Regexp(t, fmt.Sprintf(`dead-lettered \(not lost\) +%d of 1 poison records`, tc.dead), tab.String())
			if tc.dead > 0 {
				assert.Equal(t, [2]int{3, 3}, tab.DeadLetterAttempts, "the deliveries of a record when it was given up")
			}
		})
	}
}

// A wipe no live holder saw lets a shard's records come again unmarked
// (nobody could write its mark back): an Unmarked window excuses those,
// and only those; any other window does not.
func TestCountMarksExcusesOnlyWipesNoLiveHolderSaw(t *testing.T) {
	t0 := time.Now()
	first := Delivery{Inst: "a1", Shard: "soak-a/shardId-000000000000", Seq: "10", K: "a-k0", C: 1, At: t0}
	again := first
	again.Inst, again.At = "b1", t0.Add(5*time.Second)
	other := Delivery{Inst: "a1", Shard: "soak-a/shardId-000000000001", Seq: "11", K: "a-k1", C: 1, At: t0}
	otherAgain := other
	otherAgain.Inst, otherAgain.At = "b1", t0.Add(5*time.Second)
	ds := sortedByTime([]Delivery{first, again, other, otherAgain})
	wipe := Window{What: "redis-empty of shards no live instance held", Shards: map[string]bool{first.Shard: true}, From: t0.Add(-time.Minute), To: t0.Add(time.Minute), Unmarked: true}
	got := countMarks(ds, []Window{wipe}, func(string, ...any) {})
	assert.Equal(t, 1, got.Excused, "the wiped shard's duplicate")
	assert.Equal(t, 1, got.UnmarkedDups, "the other shard's duplicate still counts")
	// A wipe explains only what comes again after it began: an unmarked
	// duplicate before it is not its doing (seed 5's sixth hour: a later
	// FLUSHALL's window held a33's delivery, and the table excused c46's
	// copy, stamped ten seconds before that wipe).
	later := wipe
	later.After = t0.Add(10 * time.Second)
	got = countMarks(ds, []Window{later}, func(string, ...any) {})
	assert.Zero(t, got.Excused, "a duplicate before the wipe")
	assert.Equal(t, 2, got.UnmarkedDups)
	s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
	s.windows = []Window{later}
	m := newMonitor(s)
	m.pending = ds
	m.deliveries(t0.Add(time.Hour), true)
	assert.True(t, m.failed["redelivery mark"], "the monitor reports it too")

	plain := wipe
	plain.Unmarked = false
	got = countMarks(ds, []Window{plain}, func(string, ...any) {})
	assert.Equal(t, 2, got.UnmarkedDups, "a window of another fault excuses no missing mark")
}

// A batch a paused instance handed over just before SIGSTOP is stamped by
// its pipeline after SIGCONT, after the next owner delivered the record
// marked: its copy is the earlier delivery, stamped later (seed 5, 1 h:
// c46 and a33, kpl-k0/8396). The monitor and the table excuse an
// unmarked copy stamped after a marked one when the window of a pause of
// its instance holds both stamps, once per record; nothing else.
func TestUnmarkedCopyStampedAfterAPauseIsTheEarlierDelivery(t *testing.T) {
	t0 := time.Now()
	const shard = "soak-kpl/shardId-000000000037"
	marked := Delivery{Inst: "a33", Shard: shard, Seq: "4968/0", K: "kpl-k0", C: 8396, At: t0, Redelivered: "true", Attempt: "1"}
	late := marked
	late.Inst, late.At, late.Redelivered = "c46", t0.Add(500*time.Millisecond), ""
	third := late
	third.Inst, third.At = "b38", t0.Add(2*time.Second)
	pause := func(inst string, from, to time.Duration) Window {
		return Window{What: "pause " + inst, From: t0.Add(from), To: t0.Add(to)}
	}
	for _, tc := range []struct {
		name       string
		deliveries []Delivery
		windows    []Window
		reordered  int
		unmarked   int
	}{
		{"the paused instance's copy", []Delivery{marked, late}, []Window{pause("c46", -6*time.Second, 3*time.Second)}, 1, 0},
		{"without a pause", []Delivery{marked, late}, nil, 0, 1},
		{"a pause of another instance", []Delivery{marked, late}, []Window{pause("a33", -6*time.Second, 3*time.Second)}, 0, 1},
		{"the pause's window ends before the copy", []Delivery{marked, late}, []Window{pause("c46", -6*time.Second, 200*time.Millisecond)}, 0, 1},
		{"the first delivery unmarked", []Delivery{func() Delivery { d := marked; d.Redelivered = ""; return d }(), late}, []Window{pause("c46", -6*time.Second, 3*time.Second)}, 0, 1},
		{"a second unmarked copy", []Delivery{marked, late, third}, []Window{pause("c46", -6*time.Second, 3*time.Second), pause("b38", -6*time.Second, 3*time.Second)}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := countMarks(sortedByTime(tc.deliveries), tc.windows, func(string, ...any) {})
			assert.Equal(t, tc.reordered, got.Reordered, "excused as stamped out of order")
			assert.Equal(t, tc.unmarked, got.UnmarkedDups)

			s := &soak{runner: &runner{logf: func(string, ...any) {}}, nackers: map[string]bool{}}
			s.windows = tc.windows
			m := newMonitor(s)
			m.pending = append([]Delivery(nil), tc.deliveries...)
			m.deliveries(t0.Add(time.Hour), true)
			if tc.unmarked == 0 {
				assert.False(t, m.failed["redelivery mark"], m.v.First)
			} else {
				assert.True(t, m.failed["redelivery mark"], "the monitor reports it")
			}
		})
	}
}
