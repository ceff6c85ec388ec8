"""test_s3.py - boto3, unmodified, through the S3-mode gateway with the
lease's credentials: the session token is the sequencer, as
`fencectl lock --s3` exports it."""

import boto3
import botocore.config
import botocore.exceptions

from fencegate import LeaseLost

from .fgenv import Case, unique, var


def store_client(case):
    c = boto3.session.Session(
        aws_access_key_id=var("FG_TEST_S3_STORE_KEY_ID"),
        aws_secret_access_key=var("FG_TEST_S3_STORE_SECRET"),
        region_name=var("FG_TEST_S3_REGION")).client(
            "s3", endpoint_url=var("FG_TEST_S3_STORE"),
            config=botocore.config.Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 1}))
    case.addCleanup(c.close)
    return c


class TestBoto3(Case):
    def s3(self, session):
        c = session.client(
            "s3", endpoint_url=var("FG_TEST_S3_GATEWAY"),
            config=botocore.config.Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 1}))
        self.addCleanup(c.close)
        return c

    def test_put_object_with_the_lease_credentials(self):
        bucket = var("FG_TEST_S3_BUCKET")
        key = unique("", ".txt")
        c = self.client()
        with c.lock(bucket + "/" + key, ttl=10) as lease:
            s3 = self.s3(lease.boto3_session(
                var("FG_TEST_S3_KEY_ID"), var("FG_TEST_S3_SECRET"),
                var("FG_TEST_S3_REGION")))
            s3.put_object(Bucket=bucket, Key=key, Body=b"via boto3")
            old = lease.sequencer
            creds = lease.s3_credentials(var("FG_TEST_S3_KEY_ID"),
                                         var("FG_TEST_S3_SECRET"))
            self.assertEqual(creds.get_frozen_credentials().token, old)
        got = store_client(self).get_object(Bucket=bucket, Key=key)
        self.assertEqual(got["Body"].read(), b"via boto3")
        # the lease is gone: the same client fails before sending
        with self.assertRaises(LeaseLost):
            s3.put_object(Bucket=bucket, Key=key, Body=b"late")
        # a newer holder exists: the old token is refused by the gateway
        with c.lock(bucket + "/" + key, ttl=10):
            raw = boto3.session.Session(
                aws_access_key_id=var("FG_TEST_S3_KEY_ID"),
                aws_secret_access_key=var("FG_TEST_S3_SECRET"),
                aws_session_token=old,
                region_name=var("FG_TEST_S3_REGION"))
            with self.assertRaises(botocore.exceptions.ClientError) as cm:
                self.s3(raw).put_object(Bucket=bucket, Key=key, Body=b"x")
            self.assertEqual(cm.exception.response["Error"]["Code"],
                             "FenceStaleToken")
        got = store_client(self).get_object(Bucket=bucket, Key=key)
        self.assertEqual(got["Body"].read(), b"via boto3")
