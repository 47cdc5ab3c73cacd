package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
)

// TestHelperProcess is the body of the helper processes of the process
// tests; run normally, it does nothing.
func TestHelperProcess(t *testing.T) { ledgertest.HelperProcess(t, openSiteID) }

// openSiteID opens a site named by sqliteSite or postgresSite.
func openSiteID(ctx context.Context, id string, opts ...ledger.Option) (ledger.Store, error) {
	kind, rest, _ := strings.Cut(id, ":")
	switch kind {
	case "sqlite":
		return ledger.OpenSQLite(ctx, rest, opts...)
	case "postgres":
		schema, url, _ := strings.Cut(rest, ":")
		return ledger.OpenPostgres(ctx, url, append(opts, ledger.WithSchema(schema))...)
	}
	return nil, fmt.Errorf("unknown site %q", id)
}
