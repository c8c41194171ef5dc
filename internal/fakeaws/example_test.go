package fakeaws_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/hyperops/hyperops/internal/fakeaws"
)

// A test seeds a HyperPod cluster and points the real SageMaker client at the fake.
func Example() {
	srv := fakeaws.New(fakeaws.Options{TransitionDelay: 2 * time.Second})
	defer srv.Close()
	err := srv.AddHyperPodCluster(fakeaws.HyperPodCluster{
		Name: "ml-hp",
		InstanceGroups: []fakeaws.InstanceGroup{{
			Name: "gpu", Type: "ml.p5.48xlarge", Count: 2,
			LifecycleS3URI: "s3://bucket/lifecycle/", ExecutionRole: "arn:aws:iam::123456789012:role/hp-exec",
		}},
	})
	if err != nil {
		panic(err)
	}
	client := sagemaker.NewFromConfig(aws.Config{
		Region:       "us-west-2",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		BaseEndpoint: aws.String(srv.URL()),
	})
	out, err := client.DescribeCluster(context.Background(), &sagemaker.DescribeClusterInput{ClusterName: aws.String("ml-hp")})
	if err != nil {
		panic(err)
	}
	g := out.InstanceGroups[0]
	fmt.Println(out.ClusterStatus, *g.InstanceGroupName, g.InstanceType, *g.CurrentCount)
	// Output: InService gpu ml.p5.48xlarge 2
}
