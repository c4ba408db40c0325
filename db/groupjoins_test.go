package db

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// groupJoins groups as a map by recipient and key would, whether the
// joins come sorted (a fan-out's, compared neighbour to neighbour) or not
// (a set's), immediate ones each on their own.
func TestGroupJoinsAsAMapWould(t *testing.T) {
	byMap := func(joins []BatchJoin) [][]int {
		var groups [][]int
		at := map[[2]string]int{}
		for i, j := range joins {
			k := [2]string{j.RecipientID, j.BatchKey}
			if g, ok := at[k]; ok && j.Mode != "immediate" {
				groups[g] = append(groups[g], i)
				continue
			}
			if j.Mode != "immediate" {
				at[k] = len(groups)
			}
			groups = append(groups, []int{i})
		}
		return groups
	}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		joins := make([]BatchJoin, r.IntN(12))
		for i := range joins {
			joins[i] = BatchJoin{RecipientID: fmt.Sprint("r", r.IntN(4)), BatchKey: fmt.Sprint("k", r.IntN(3)), Mode: "cooldown"}
			if r.IntN(5) == 0 {
				joins[i].Mode = "immediate"
			}
		}
		if round%2 == 0 {
			slices.SortStableFunc(joins, func(a, b BatchJoin) int {
				return strings.Compare(a.RecipientID+"\x00"+a.BatchKey, b.RecipientID+"\x00"+b.BatchKey)
			})
		}
		var got [][]int
		for _, g := range groupJoins(joins) {
			got = append(got, g.idx)
		}
		if want := byMap(joins); !reflect.DeepEqual(got, want) {
			t.Fatalf("joins %v: grouped %v, want %v", joins, got, want)
		}
	}
}
