"""test_s3_smoke.py - temporary"""
import s3env

class Smoke(s3env.S3Case):
    routes = ("/{bucket}/ {bucket}",)

    def test_put_needs_token(self):
        b = self.make_bucket()
        r = self.s3("PUT", "/%s/k" % b, body=b"hi")
        self.assertS3Error(r, 428, "FenceTokenRequired")
        seq = self.sequencer(b)
        r = self.s3("PUT", "/%s/k" % b, body=b"hi", token=seq)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.store_get(b, "k"), (200, b"hi"))
