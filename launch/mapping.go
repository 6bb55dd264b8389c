package launch

// PMI_process_mapping, the job attribute in which Hydra and Slurm say
// which node each rank runs on:
//
//	(vector,(start,count,ppn),(start,count,ppn),...)
//
// Each block says: count nodes numbered from start, ppn ranks on each,
// ranks handed out in order, block after block; when the blocks hold
// fewer ranks than the job, the assignment starts over (Hydra writes
// "(vector,(0,2,1))" for a job of 4 ranks on 2 nodes placed round-robin).
// An empty mapping means the launcher could not say.

import (
	"strconv"
	"strings"
)

type mapBlock struct{ start, count, ppn int }

// parseMapping decodes a process mapping. It refuses anything but the
// vector form, with at most maxBlocks blocks of non-negative numbers.
func parseMapping(s string) ([]mapBlock, error) {
	const maxBlocks = 1 << 16
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "(") || !strings.HasSuffix(t, ")") {
		return nil, syntax("process mapping %.60q is not parenthesized", s)
	}
	t = strings.TrimSpace(t[1 : len(t)-1])
	rest, ok := strings.CutPrefix(t, "vector")
	if !ok {
		return nil, syntax("process mapping %.60q is not a vector", s)
	}
	var blocks []mapBlock
	for {
		rest = strings.TrimSpace(rest)
		if rest == "" {
			break
		}
		rest, ok = strings.CutPrefix(rest, ",")
		if !ok {
			return nil, syntax("process mapping %.60q: expected ','", s)
		}
		rest = strings.TrimSpace(rest)
		rest, ok = strings.CutPrefix(rest, "(")
		if !ok {
			return nil, syntax("process mapping %.60q: expected '('", s)
		}
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return nil, syntax("process mapping %.60q: unclosed block", s)
		}
		f := strings.Split(rest[:end], ",")
		rest = rest[end+1:]
		if len(f) != 3 {
			return nil, syntax("process mapping %.60q: a block needs 3 numbers", s)
		}
		var v [3]int
		for i, x := range f {
			n, err := strconv.Atoi(strings.TrimSpace(x))
			if err != nil || n < 0 || n > maxRanks {
				return nil, syntax("process mapping %.60q: bad number %q", s, x)
			}
			v[i] = n
		}
		if len(blocks) == maxBlocks {
			return nil, syntax("process mapping has more than %d blocks", maxBlocks)
		}
		blocks = append(blocks, mapBlock{start: v[0], count: v[1], ppn: v[2]})
	}
	if len(blocks) == 0 {
		return nil, syntax("process mapping %.60q has no blocks", s)
	}
	return blocks, nil
}

// nodeOf returns the node of every rank of a job of size ranks.
func nodeOf(blocks []mapBlock, size int) ([]int, error) {
	per := 0
	for _, b := range blocks {
		if b.count > maxRanks || b.ppn > maxRanks || b.start > maxRanks {
			return nil, syntax("process mapping block %v is too large", b)
		}
		per += b.count * b.ppn
		if per > maxRanks {
			per = maxRanks
		}
	}
	if per == 0 {
		return nil, syntax("process mapping places no ranks")
	}
	nodes := make([]int, size)
	r := 0
	for r < size {
		for _, b := range blocks {
			if b.count == 0 || b.ppn == 0 {
				continue
			}
			for n := 0; n < b.count; n++ {
				for p := 0; p < b.ppn; p++ {
					if r == size {
						return nodes, nil
					}
					nodes[r] = b.start + n
					r++
				}
			}
		}
	}
	return nodes, nil
}

// localFromMapping sets sh.localRank and sh.localSize from sh.mapping.
func localFromMapping(sh *shape) error {
	blocks, err := parseMapping(sh.mapping)
	if err != nil {
		return err
	}
	nodes, err := nodeOf(blocks, sh.size)
	if err != nil {
		return err
	}
	me := nodes[sh.rank]
	sh.localRank, sh.localSize = 0, 0
	for r, n := range nodes {
		if n == me {
			if r < sh.rank {
				sh.localRank++
			}
			sh.localSize++
		}
	}
	return nil
}
