import crypto from 'node:crypto';
import { AwsV4Signer } from 'aws4fetch';

// The signer of the service's S3 client against the GET Object example of AWS's SigV4 documentation and
// its published signature (the example signs its Range header, which aws4fetch signs only when told to).
test('aws4fetch signs the S3 SigV4 documentation example to its published signature', async () => {
  const signer = new AwsV4Signer({
    method: 'GET',
    url: 'https://examplebucket.s3.amazonaws.com/test.txt',
    headers: { Range: 'bytes=0-9', 'x-amz-content-sha256': crypto.createHash('sha256').update('').digest('hex') },
    accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
    secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
    region: 'us-east-1',
    service: 's3',
    datetime: '20130524T000000Z',
    allHeaders: true,
  });
  const { headers } = await signer.sign();
  expect(headers.get('authorization')?.split(/,\s*/)).toEqual([
    'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request',
    'SignedHeaders=host;range;x-amz-content-sha256;x-amz-date',
    'Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
  ]);
});
