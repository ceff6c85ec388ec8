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

    def test_two_leases_sign_one_delete_objects(self):
        from fencegate.integrations import boto3_session
        bucket = var("FG_TEST_S3_BUCKET")
        keys = [unique("", ".txt") for _ in range(2)]
        c = self.client()
        with c.lock(bucket + "/" + keys[0], ttl=10) as l0, \
                c.lock(bucket + "/" + keys[1], ttl=10) as l1:
            both = boto3_session(var("FG_TEST_S3_KEY_ID"),
                                 var("FG_TEST_S3_SECRET"), [l0, l1],
                                 var("FG_TEST_S3_REGION"))
            creds = both.get_credentials().get_frozen_credentials()
            # the form `fencectl lock a --s3 -- fencectl lock b --s3` sets
            self.assertEqual(creds.token, l0.sequencer + "," + l1.sequencer)
            s3 = self.s3(both)
            for k in keys:
                s3.put_object(Bucket=bucket, Key=k, Body=b"two")
            one = self.s3(l0.boto3_session(var("FG_TEST_S3_KEY_ID"),
                                           var("FG_TEST_S3_SECRET"),
                                           var("FG_TEST_S3_REGION")))
            objs = {"Objects": [{"Key": k} for k in keys], "Quiet": True}
            with self.assertRaises(botocore.exceptions.ClientError) as cm:
                one.delete_objects(Bucket=bucket, Delete=objs)
            self.assertEqual(cm.exception.response["Error"]["Code"],
                             "FenceWrongLock")
            s3.delete_objects(Bucket=bucket, Delete=objs)
        store = store_client(self)
        for k in keys:
            with self.assertRaises(botocore.exceptions.ClientError):
                store.head_object(Bucket=bucket, Key=k)
