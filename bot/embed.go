package bot

import (
	"context"
	"fmt"
	"net"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/rs/zerolog"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops/aws"
	"github.com/hyperops/hyperops/ops/state"
)

// Embedding is what a process that embeds the whole bot (the playground) decides that a configuration file cannot:
// the AWS SDK configuration, how often capacity changes are polled, and the listener of /healthz.
type Embedding struct {
	// AWS replaces the SDK's default credential chain (static credentials for a fake AWS); nil uses the chain.
	AWS *awssdk.Config
	// AWSPollInterval is the time between two status reads of a capacity change (default aws.DefaultPollInterval).
	AWSPollInterval time.Duration
	// Listener serves /healthz, /readyz and /metrics; nil listens on server.listen.
	Listener net.Listener
	// Started is called once the bot is wired, before it connects, so the embedder can read its readiness.
	Started func(*Bot)
}

// RunEmbedded is Run with the choices of e: it connects Redis (embedded when no URL is configured), builds the
// catalog from the configured clusters and the AWS clients of e, and serves until ctx ends.
func RunEmbedded(ctx context.Context, cfg *config.Config, log zerolog.Logger, e Embedding) error {
	rdb, stop, err := connectRedis(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stop()
	store := state.New(rdb, state.Options{KeyPrefix: cfg.Redis.KeyPrefix, RequestTTL: cfg.Redis.RequestTTL.Std(), DedupeTTL: cfg.Redis.DedupeTTL.Std(),
		AuditMaxLen: cfg.Audit.MaxEntries})
	var clients *aws.Clients
	if e.AWS != nil {
		clients = aws.NewWithAWSConfig(cfg, *e.AWS)
	} else if clients, err = aws.New(ctx, cfg); err != nil {
		return fmt.Errorf("set up the AWS clients: %w", err)
	}
	if e.AWSPollInterval > 0 {
		clients.PollInterval = e.AWSPollInterval
	}
	clients.OnWarning = func(cluster, msg string) { log.Warn().Str("cluster", cluster).Msg(msg) }
	w, err := buildCatalogWith(cfg, clients, store, store)
	if err != nil {
		return err
	}
	b, err := New(Options{Config: cfg, Log: log, Redis: rdb, Catalog: w.catalog, Clusters: w.clusters, Pricer: w.pricer,
		Groups: awsGroups{clients: w.aws, cfg: cfg}, Listener: e.Listener})
	if err != nil {
		return err
	}
	if e.Started != nil {
		e.Started(b)
	}
	return b.Run(ctx)
}
