package ops

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/failsafe-go/failsafe-go"
	"github.com/urfave/cli/v2"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// flagName names a stream consumer.
const flagName = "name"

// consumersAPI is the part of the Kinesis client `consumers` uses.
type consumersAPI interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	ListStreamConsumers(ctx context.Context, in *kinesis.ListStreamConsumersInput, opts ...func(*kinesis.Options)) (*kinesis.ListStreamConsumersOutput, error)
	DeregisterStreamConsumer(ctx context.Context, in *kinesis.DeregisterStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.DeregisterStreamConsumerOutput, error)
}

// ConsumersCommand is `connect-kinesis consumers`: list and deregister the
// stream consumers enhanced fan-out reads through. The input registers a
// consumer but never removes it (every instance of a group shares it), so
// retiring an application ends here.
func ConsumersCommand() *cli.Command {
	common := func(extra ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{
			&cli.StringFlag{Name: flagStream, Usage: "the stream name or ARN", Required: true},
			&cli.StringFlag{Name: flagRegion, Usage: "AWS region (default: the SDK's chain)"},
			&cli.StringFlag{Name: flagEndpoint, Usage: "Kinesis endpoint URL, e.g. an emulator"},
			&cli.StringFlag{Name: flagProfile, Usage: "AWS shared-config profile (default: the SDK's chain)"},
		}, extra...)
	}
	return &cli.Command{
		Name:        "consumers",
		Usage:       "List or deregister a stream's enhanced fan-out consumers",
		Description: "See docs/enhanced-fan-out.md.",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "Print the stream's consumers with their status and ARN",
				Flags: common(),
				Action: func(c *cli.Context) error {
					api, arn, err := consumersFromFlags(c)
					if err != nil {
						return err
					}
					return listConsumers(c.Context, c.App.Writer, api, arn)
				},
			},
			{
				Name:  "deregister",
				Usage: "Deregister a consumer by name: pipelines reading through it stop receiving records",
				Flags: common(
					&cli.StringFlag{Name: flagName, Usage: "the consumer name (enhanced_fan_out.consumer_name, by default checkpoint.group)", Required: true},
					&cli.BoolFlag{Name: flagYes, Usage: "confirm the deregistration"},
				),
				Action: func(c *cli.Context) error {
					if !c.Bool(flagYes) {
						return fmt.Errorf("deregistering consumer %q stops every pipeline reading through it; run again with --%s", c.String(flagName), flagYes)
					}
					api, arn, err := consumersFromFlags(c)
					if err != nil {
						return err
					}
					if err := deregisterConsumer(c.Context, api, arn, c.String(flagName)); err != nil {
						return err
					}
					_, err = fmt.Fprintf(c.App.Writer, "Deregistered consumer %s of %s\n", c.String(flagName), arn)
					return err
				},
			},
		},
	}
}

// consumersFromFlags builds the client and resolves the stream's ARN.
func consumersFromFlags(c *cli.Context) (consumersAPI, string, error) {
	settings := awsconf.Settings{Region: c.String(flagRegion), Endpoint: c.String(flagEndpoint), Profile: c.String(flagProfile)}
	awsCfg, err := settings.Load(c.Context)
	if err != nil {
		return nil, "", err
	}
	api := settings.KinesisClient(awsCfg)
	stream := c.String(flagStream)
	if kinesisx.IsARN(stream) {
		return api, stream, nil
	}
	in := &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)}
	out, err := failsafe.With(kinesisx.RetryBuilder[*kinesis.DescribeStreamSummaryOutput](operatorBackoff).Build()).
		WithContext(c.Context).Get(func() (*kinesis.DescribeStreamSummaryOutput, error) { return api.DescribeStreamSummary(c.Context, in) })
	if err != nil {
		if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound {
			return nil, "", fmt.Errorf("stream %q not found in region %s (check --stream, --region and --endpoint)", stream, awsCfg.Region)
		}
		return nil, "", fmt.Errorf("describing stream %s: %w", stream, err)
	}
	return api, aws.ToString(out.StreamDescriptionSummary.StreamARN), nil
}

// listConsumers prints every consumer of the stream, following pages.
func listConsumers(ctx context.Context, w io.Writer, api consumersAPI, streamARN string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tCREATED\tARN")
	policy := kinesisx.RetryBuilder[*kinesis.ListStreamConsumersOutput](operatorBackoff).Build()
	in := &kinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN)}
	for {
		out, err := failsafe.With(policy).WithContext(ctx).Get(func() (*kinesis.ListStreamConsumersOutput, error) {
			return api.ListStreamConsumers(ctx, in)
		})
		if err != nil {
			return fmt.Errorf("listing consumers of %s: %w", streamARN, err)
		}
		for _, c := range out.Consumers {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", aws.ToString(c.ConsumerName), c.ConsumerStatus,
				aws.ToTime(c.ConsumerCreationTimestamp).UTC().Format("2006-01-02T15:04:05Z"), aws.ToString(c.ConsumerARN))
		}
		if aws.ToString(out.NextToken) == "" {
			return tw.Flush()
		}
		in = &kinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), NextToken: out.NextToken}
	}
}

// deregisterConsumer removes the stream's consumer of that name.
func deregisterConsumer(ctx context.Context, api consumersAPI, streamARN, name string) error {
	in := &kinesis.DeregisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(name)}
	_, err := failsafe.With(kinesisx.RetryBuilder[*kinesis.DeregisterStreamConsumerOutput](operatorBackoff).Build()).
		WithContext(ctx).Get(func() (*kinesis.DeregisterStreamConsumerOutput, error) { return api.DeregisterStreamConsumer(ctx, in) })
	switch {
	case kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound:
		return fmt.Errorf("flag --%s: stream %s has no consumer %q (see `consumers list`): %w", flagName, streamARN, name, err)
	case err != nil:
		return fmt.Errorf("deregistering consumer %s of %s: %w", name, streamARN, err)
	}
	return nil
}
