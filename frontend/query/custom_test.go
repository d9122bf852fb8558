package query

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
)

var testCustom = map[string]enumspb.IndexedValueType{
	"CustomerId": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"Notes":      enumspb.INDEXED_VALUE_TYPE_TEXT,
	"Amount":     enumspb.INDEXED_VALUE_TYPE_INT,
	"Ratio":      enumspb.INDEXED_VALUE_TYPE_DOUBLE,
	"Urgent":     enumspb.INDEXED_VALUE_TYPE_BOOL,
	"DueAt":      enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"Tags":       enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

func TestActivityQueriesOnCustomSearchAttributes(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a := &Activity{ActivityID: "a", RunID: "1", Status: enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING, SearchAttributes: map[string]any{
		"CustomerId": "c-1", "Notes": "Rush order for the Berlin office", "Amount": int64(100), "Ratio": 0.5,
		"Urgent": true, "DueAt": due, "Tags": []string{"vip", "eu"},
	}}
	b := &Activity{ActivityID: "b", RunID: "1", Status: enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED, SearchAttributes: map[string]any{
		"CustomerId": "c-2", "Amount": int64(9007199254740993), "Ratio": 2.25, "Urgent": false, "Tags": []string{"us"},
	}}
	c := &Activity{ActivityID: "c", RunID: "1", Status: enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING} // no attributes
	rows := []*Activity{a, b, c}
	for _, tc := range []struct {
		query string
		want  []*Activity
	}{
		{`CustomerId = "c-1"`, []*Activity{a}},
		{`customerid != "c-1"`, []*Activity{b}}, // unset is NULL: matches neither = nor !=
		{`CustomerId IN ("c-1", "c-2")`, []*Activity{a, b}},
		{`CustomerId STARTS_WITH "c-"`, []*Activity{a, b}},
		{`CustomerId IS NULL`, []*Activity{c}},
		{`Amount > 50`, []*Activity{a, b}},
		{`Amount = 9007199254740993`, []*Activity{b}}, // compared as integers, not floats
		{`Amount = "100"`, []*Activity{a}},
		{`Amount BETWEEN 1 AND 100`, []*Activity{a}},
		{`Amount NOT BETWEEN 1 AND 100`, []*Activity{b}},
		{`Amount IN (1, 100)`, []*Activity{a}},
		{`Ratio >= 0.5 AND Ratio < 2`, []*Activity{a}},
		{`Ratio = 2.25`, []*Activity{b}},
		{`Urgent = true`, []*Activity{a}},
		{`Urgent != true`, []*Activity{b}},
		{`Urgent = "false"`, []*Activity{b}},
		{`Tags = "vip"`, []*Activity{a}},
		{`Tags != "vip"`, []*Activity{b}},
		{`Tags IN ("us", "eu")`, []*Activity{a, b}},
		{`Tags IS NULL`, []*Activity{c}},
		{`Notes = "berlin rush"`, []*Activity{a}},
		{`Notes = "berlin paris"`, nil},
		{`Notes IS NOT NULL`, []*Activity{a}},
		{`DueAt < "2026-04-01T00:00:00Z"`, []*Activity{a}},
		{`DueAt BETWEEN "2026-01-01T00:00:00Z" AND "2026-12-31T00:00:00Z"`, []*Activity{a}},
		{`(Amount > 50 OR Tags = "vip") AND ExecutionStatus = "Running"`, []*Activity{a}},
		{`ExecutionStatus = "Running" ORDER BY Amount DESC`, []*Activity{a, c}},
	} {
		q, err := ParseActivitiesWith(tc.query, testCustom)
		require.NoError(t, err, tc.query)
		var got []*Activity
		for _, r := range rows {
			if q.MatchesActivity(r) {
				got = append(got, r)
			}
		}
		require.Equal(t, tc.want, got, tc.query)
		again, err := ParseActivitiesWith(q.String(), testCustom)
		require.NoError(t, err, q.String())
		require.Equal(t, q.String(), again.String(), tc.query)
	}
}

func TestActivityQueryOrderAndGroup(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &Activity{ActivityID: "a", Status: enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED, StartTime: t0.Add(2 * time.Second),
		SearchAttributes: map[string]any{"Amount": int64(5)}}
	b := &Activity{ActivityID: "b", Status: enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING, StartTime: t0.Add(time.Second),
		SearchAttributes: map[string]any{"Amount": int64(7)}}
	c := &Activity{ActivityID: "c", Status: enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING, StartTime: t0.Add(3 * time.Second)}
	d := &Activity{ActivityID: "d", Status: enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING, StartTime: t0.Add(time.Second),
		SearchAttributes: map[string]any{"Amount": int64(5)}}
	for _, tc := range []struct {
		query string
		want  []*Activity
	}{
		{`ORDER BY StartTime`, []*Activity{b, d, a, c}},      // ties by activity ID
		{`ORDER BY StartTime DESC`, []*Activity{c, a, d, b}}, // ties descending too
		{`ORDER BY Amount`, []*Activity{a, d, b, c}},         // NULL last
		{`ORDER BY Amount DESC, StartTime ASC`, []*Activity{c, b, d, a}},
		{`ORDER BY ExecutionStatus, ActivityId DESC`, []*Activity{d, c, b, a}},
	} {
		q, err := ParseActivitiesWith(tc.query, testCustom)
		require.NoError(t, err, tc.query)
		require.True(t, q.Ordered())
		got := []*Activity{a, b, c, d}
		slices.SortFunc(got, q.CompareActivities)
		require.Equal(t, tc.want, got, tc.query)
		again, err := ParseActivitiesWith(q.String(), testCustom)
		require.NoError(t, err, q.String())
		require.Equal(t, q.String(), again.String())
	}

	q, err := ParseActivitiesWith(`TaskQueue = "q" GROUP BY ExecutionStatus`, nil)
	require.NoError(t, err)
	require.True(t, q.GroupedByStatus())
	require.False(t, q.Ordered())
	q, err = ParseActivities(`GROUP BY executionstatus`)
	require.NoError(t, err)
	require.True(t, q.GroupedByStatus())
	require.True(t, q.MatchesActivity(a))
}

func TestActivityQueryErrorsOnCustomSearchAttributes(t *testing.T) {
	t.Parallel()
	for query, msg := range map[string]string{
		`Unregistered = "x"`:                    `unknown column "Unregistered"`,
		`Amount = "ten"`:                        `"ten" is not an integer`,
		`Amount = 1.5`:                          `"1.5" is not an integer`,
		`Ratio > "x"`:                           `"x" is not a number`,
		`Urgent > true`:                         `operator > is not supported for Urgent`,
		`Urgent = 1`:                            `expected true or false`,
		`Tags > "a"`:                            `operator > is not supported for Tags`,
		`Tags STARTS_WITH "a"`:                  `STARTS_WITH is not supported for Tags`,
		`Notes IN ("a")`:                        `IN is not supported for Notes`,
		`Urgent BETWEEN 1 AND 2`:                `BETWEEN is only supported for`,
		`ORDER BY Notes`:                        `cannot ORDER BY Notes`,
		`ORDER BY Nope`:                         `expected a column to ORDER BY`,
		`ORDER Amount`:                          `expected BY after ORDER`,
		`GROUP BY TaskQueue`:                    `GROUP BY is only supported for ExecutionStatus`,
		`ORDER BY Amount ORDER BY Ratio`:        `ORDER BY is given twice`,
		`Amount > 1 ORDER BY Amount LIMIT 5`:    `expected AND, OR or end of query`,
		`GROUP BY ExecutionStatus AND Amount=1`: `expected AND, OR or end of query`,
	} {
		_, err := ParseActivitiesWith(query, testCustom)
		require.ErrorContains(t, err, msg, query)
	}
	// Workers take no clauses.
	_, err := Parse(`ORDER BY StartTime`)
	require.ErrorContains(t, err, "ORDER BY is not supported")
}
