//go:build tools

// Package tools pins the Volcano packages that build.sh compiles, so that the
// module graph and go.sum cover them.
package tools

import (
	_ "volcano.sh/volcano/cmd/cli"
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
	_ "volcano.sh/volcano/cmd/webhook-manager"
	_ "volcano.sh/volcano/test/e2e/dra"
	_ "volcano.sh/volcano/test/e2e/jobp"
	_ "volcano.sh/volcano/test/e2e/jobseq"
	_ "volcano.sh/volcano/test/e2e/schedulingaction"
	_ "volcano.sh/volcano/test/e2e/schedulingbase"
	_ "volcano.sh/volcano/test/e2e/util"
	_ "volcano.sh/volcano/test/e2e/vcctl"
)
