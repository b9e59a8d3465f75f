package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// probe connects with cfg, asks the cluster for the topic's partitions (for
// the brokers only, with a topic per tenant) and says what it answered.
// Nothing is produced and no topic is created.
func probe(ctx context.Context, cfg Config) (string, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == nil {
		return "", errors.New("no brokers or no topic")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cl, err := kgo.NewClient(clientOptions(cfg)...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	// Ping tries each broker once and says why the last one failed, where
	// a request is retried until the deadline.
	if err := cl.Ping(ctx); err != nil {
		return "", errors.New(probeError(cfg, err))
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	if !cfg.Topic.Templated() {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(cfg.Topic.Text())
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", errors.New(probeError(cfg, err))
	}
	who := fmt.Sprintf("connected to %d brokers as %s", len(resp.Brokers), cfg.ClientID)
	if cfg.SASL != "" {
		who += "; the brokers accepted the credentials"
	}
	if cfg.Topic.Templated() {
		return who + "; the topic " + cfg.Topic.Text() + " depends on each event's tenant: not checked; nothing was produced", nil
	}
	if len(resp.Topics) != 1 {
		return "", fmt.Errorf("%s, but the cluster said nothing of topic %s", who, cfg.Topic.Text())
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return "", fmt.Errorf("%s, but topic %s: %s", who, cfg.Topic.Text(), describe(cfg, err))
	}
	return fmt.Sprintf("%s; topic %s has %d partitions; nothing was produced", who, cfg.Topic.Text(), len(resp.Topics[0].Partitions)), nil
}

func probeError(cfg Config, err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no broker of %s answered within %s", strings.Join(cfg.Brokers, ","), cfg.Timeout)
	}
	return describe(cfg, err)
}
