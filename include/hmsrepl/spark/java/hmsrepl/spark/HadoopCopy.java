// Verified file copies on Spark executors through Hadoop's FileSystem API (hmsrepl.spark.hadoop_copy).
//
// The driver (Python) has already checked every path against the copy's roots and hands over a fixed list
// of copy tasks; this class touches only the paths named there, and one temporary name per copy beside its
// destination. Each copy is streamed through the Hadoop client (block reads and writes over the DataNodes'
// RPC, Kerberos and delegation tokens handled by Hadoop), its CRC32C computed while streaming, written under
// a temporary name, checked against the expected CRC and the destination's composite CRC from HDFS, then
// renamed to its destination. The Python driver checks every reported checksum again before trusting a copy.
//
// Task line (fields URL-encoded, tab separated):
//   group, id, mode (load|tree), destination, final, expected size (-1: unknown), expected CRC32C hex (or
//   empty), candidate source...
// "load": the destination is the final name's staging name; a final or staged file that already holds the
// expected content is reported ("inplace", "prefetched") instead of copied; candidates are tried in order.
// "tree": the destination is the final name; the expected CRC is the source's composite CRC.
// Result line (URL-encoded, tab separated):
//   id, status (copied|inplace|prefetched|failed), source, bytes copied, length, stream CRC hex,
//   destination composite CRC hex (or empty), expected CRC hex used (or empty), reason
package hmsrepl.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.Serializable;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.zip.CRC32C;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileChecksum;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;

public final class HadoopCopy {
    public static final String ENGINE = "hadoop-filesystem";
    static final String COMPOSITE_CRC32C = "COMPOSITE-CRC32C";
    static final String STAGING_PREFIX = ".hmsrepl-staging-";
    // A staging name too, so that a copy cut short (a killed executor) is swept like any unpublished copy.
    static final String TEMP_PREFIX = STAGING_PREFIX + "tmp-";
    static final int BUFFER = 1 << 20;
    static final List<String> SCHEMES = Arrays.asList("hdfs");

    public HadoopCopy() {}

    /** Copy every task of {@code payload} on the executors, one Spark task per group; result lines. */
    public String copy(JavaSparkContext jsc, String payload, int threads) {
        Map<String, List<String>> groups = new LinkedHashMap<>();
        for (String line : payload.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String group = line.substring(0, line.indexOf('\t'));
            groups.computeIfAbsent(group, g -> new ArrayList<>()).add(line.substring(group.length() + 1));
        }
        HashMap<String, String> conf = new HashMap<>();
        for (Map.Entry<String, String> entry : jsc.hadoopConfiguration()) {
            conf.put(entry.getKey(), entry.getValue());
        }
        conf.put("dfs.checksum.combine.mode", "COMPOSITE_CRC");
        List<List<String>> slices = new ArrayList<>(groups.values());
        List<String> results = jsc.parallelize(slices, Math.max(1, slices.size()))
                .flatMap(new CopyGroup(conf, Math.max(1, threads)))
                .collect();
        return String.join("\n", results);
    }

    /** One Spark task: a group's copies with up to {@code threads} in flight. */
    static final class CopyGroup implements FlatMapFunction<List<String>, String>, Serializable {
        private static final long serialVersionUID = 1L;
        private final HashMap<String, String> settings;
        private final int threads;

        CopyGroup(HashMap<String, String> settings, int threads) {
            this.settings = settings;
            this.threads = threads;
        }

        @Override
        public Iterator<String> call(List<String> group) throws Exception {
            Configuration conf = new Configuration(false);
            for (Map.Entry<String, String> entry : settings.entrySet()) {
                conf.set(entry.getKey(), entry.getValue());
            }
            ExecutorService pool = Executors.newFixedThreadPool(Math.min(threads, Math.max(1, group.size())));
            try {
                List<Future<String>> futures = new ArrayList<>();
                for (String line : group) {
                    futures.add(pool.submit(() -> copyOne(conf, line)));
                }
                List<String> out = new ArrayList<>();
                for (Future<String> future : futures) {
                    out.add(future.get());
                }
                return out.iterator();
            } finally {
                pool.shutdownNow();
            }
        }
    }

    static String copyOne(Configuration conf, String line) {
        String[] fields = line.split("\t", -1);
        String id = fields.length > 0 ? fields[0] : "";
        try {
            if (fields.length < 7) {
                throw new IllegalArgumentException("malformed task");
            }
            String mode = decode(fields[1]);
            Path destination = checked(decode(fields[2]));
            Path finalPath = checked(decode(fields[3]));
            long size = Long.parseLong(decode(fields[4]));
            String expected = decode(fields[5]);
            List<Path> candidates = new ArrayList<>();
            for (int i = 6; i < fields.length; i++) {
                candidates.add(checked(decode(fields[i])));
            }
            if (mode.equals("load")) {
                boolean staged = destination.getName().equals(STAGING_PREFIX + finalPath.getName())
                        && destination.getParent().equals(finalPath.getParent());
                if (!staged) {
                    throw new IllegalArgumentException("a load's copy must go to its staging name");
                }
            } else if (!mode.equals("tree") || !destination.equals(finalPath) || candidates.size() != 1) {
                throw new IllegalArgumentException("unknown copy mode '" + mode + "'");
            }
            return new Copy(conf, id, destination, finalPath, size, expected, candidates).run(mode);
        } catch (Exception e) {
            return result(id, "failed", "", 0, 0, "", "", "", describe(e));
        }
    }

    /** A path of a supported scheme with an authority, absolute, without '.', '..' or empty segments.
     *  The string is a Hadoop path as Hive and Spark write it: '%' is part of a name ("day=k%3Av"), not an
     *  escape, so it is read with Path(String), and Hadoop's reading must name exactly the path checked. */
    static Path checked(String uri) {
        int sep = uri.indexOf("://");
        if (sep <= 0 || !SCHEMES.contains(uri.substring(0, sep).toLowerCase())) {
            throw new IllegalArgumentException("'" + uri + "' is not an hdfs:// path");
        }
        String rest = uri.substring(sep + 3);
        int slash = rest.indexOf('/');
        String path = slash > 0 ? rest.substring(slash) : "";
        if (path.length() < 2) {
            throw new IllegalArgumentException("'" + uri + "' is not an absolute hdfs://namenode/path");
        }
        for (String segment : path.substring(1).split("/", -1)) {
            if (segment.isEmpty() || segment.equals(".") || segment.equals("..")) {
                throw new IllegalArgumentException("'" + uri + "' has an empty, '.' or '..' segment");
            }
        }
        Path parsed = new Path(uri);
        if (!path.equals(parsed.toUri().getPath()) || parsed.toUri().getAuthority() == null) {
            throw new IllegalArgumentException("'" + uri + "' does not name one HDFS path");
        }
        return parsed;
    }

    /** One task's copy: the files it names, and its own temporary name. */
    static final class Copy {
        final Configuration conf;
        final String id;
        final Path destination;
        final Path finalPath;
        final long size;
        final String expected;
        final List<Path> candidates;

        Copy(Configuration conf, String id, Path destination, Path finalPath, long size, String expected,
                List<Path> candidates) {
            this.conf = conf;
            this.id = id;
            this.destination = destination;
            this.finalPath = finalPath;
            this.size = size;
            this.expected = expected;
            this.candidates = candidates;
        }

        String run(String mode) throws IOException {
            FileSystem target = destination.getFileSystem(conf);
            if (mode.equals("load") && size >= 0 && !expected.isEmpty()) {
                String at = existing(target, finalPath, size);
                if (expected.equals(at)) {
                    return result(id, "inplace", finalPath.toString(), 0, size, "", at, expected, "");
                }
                at = existing(target, destination, size);
                if (expected.equals(at)) {
                    return result(id, "prefetched", destination.toString(), 0, size, "", at, expected, "");
                }
            }
            List<String> tried = new ArrayList<>();
            for (Path candidate : candidates) {
                FileSystem source = candidate.getFileSystem(conf);
                FileStatus status;
                try {
                    status = linkStatus(source, candidate);
                } catch (FileNotFoundException e) {
                    tried.add(candidate + " (missing)");
                    continue;
                }
                if (status.isSymlink()) {
                    tried.add(candidate + " (a symbolic link: refused)");
                    continue;
                }
                if (!status.isFile()) {
                    tried.add(candidate + " (not a file: refused)");
                    continue;
                }
                if (size >= 0 && status.getLen() != size) {
                    tried.add(candidate + " (" + status.getLen() + " bytes, expected " + size + ")");
                    continue;
                }
                String want = expected;
                if (mode.equals("tree")) {
                    want = composite(source, candidate);
                    if (want == null) {
                        want = "";
                    }
                }
                String outcome = copyFrom(source, candidate, status.getLen(), target, want);
                if (outcome.startsWith("!")) {
                    tried.add(candidate + " (" + outcome.substring(1) + ")");
                    continue;
                }
                return outcome;
            }
            throw new IOException("no copy with the expected content: tried " + String.join("; ", tried));
        }

        /** Stream one candidate to a temporary name, verify, rename to the destination; "!reason" on a
         *  mismatch (the temporary copy removed). */
        String copyFrom(FileSystem source, Path candidate, long length, FileSystem target, String want)
                throws IOException {
            Path temp = new Path(destination.getParent(), TEMP_PREFIX + UUID.randomUUID() + "-" + destination.getName());
            CRC32C crc = new CRC32C();
            long copied = 0;
            boolean done = false;
            try {
                try (InputStream in = source.open(candidate, BUFFER);
                        OutputStream out = target.create(temp, false, BUFFER)) {
                    byte[] buffer = new byte[BUFFER];
                    int n;
                    while ((n = in.read(buffer)) > 0) {
                        crc.update(buffer, 0, n);
                        out.write(buffer, 0, n);
                        copied += n;
                    }
                }
                String streamed = hex(crc.getValue());
                String stored = composite(target, temp);
                if (copied != length) {
                    return "!read " + copied + " bytes of " + length + ": it changed during the copy";
                }
                if (!want.isEmpty() && !want.equals(streamed)) {
                    return "!checksum crc32c-" + streamed + "-" + copied + ", expected crc32c-" + want + "-" + length;
                }
                if (stored != null && !stored.equals(streamed)) {
                    return "!stored checksum crc32c-" + stored + " differs from the bytes written (" + streamed + ")";
                }
                // One rename that replaces an older file (HDFS: atomic), so a reader sees the old file or
                // the new one, never neither.
                FileContext.getFileContext(destination.toUri(), conf)
                        .rename(temp, destination, Options.Rename.OVERWRITE);
                done = true;
                return result(id, "copied", candidate.toString(), copied, copied, streamed,
                        stored == null ? "" : stored, want, "");
            } finally {
                if (!done) {
                    target.delete(temp, false);
                }
            }
        }
    }

    static FileStatus linkStatus(FileSystem fs, Path path) throws IOException {
        try {
            return fs.getFileLinkStatus(path);
        } catch (UnsupportedOperationException e) {
            return fs.getFileStatus(path);
        }
    }

    /** The composite CRC32C of a plain file of {@code size} bytes at {@code path}, else null (absent, other
     *  size, a link or a directory, no composite CRC). */
    static String existing(FileSystem fs, Path path, long size) throws IOException {
        try {
            FileStatus status = linkStatus(fs, path);
            if (!status.isFile() || status.isSymlink() || status.getLen() != size) {
                return null;
            }
            return composite(fs, path);
        } catch (FileNotFoundException e) {
            return null;
        }
    }

    /** The whole-file CRC32C HDFS gives with COMPOSITE_CRC, or null when it cannot (other chunk CRCs). */
    static String composite(FileSystem fs, Path path) throws IOException {
        FileChecksum sum = fs.getFileChecksum(path);
        if (sum == null || !COMPOSITE_CRC32C.equals(sum.getAlgorithmName()) || sum.getBytes().length != 4) {
            return null;
        }
        byte[] b = sum.getBytes();
        long value = ((b[0] & 0xffL) << 24) | ((b[1] & 0xffL) << 16) | ((b[2] & 0xffL) << 8) | (b[3] & 0xffL);
        return hex(value);
    }

    static String hex(long value) {
        return String.format("%08x", value);
    }

    static String describe(Throwable e) {
        String message = e.getMessage() == null ? "" : e.getMessage().split("\n")[0];
        return e instanceof IOException && message.startsWith("no copy") ? message
                : e.getClass().getSimpleName() + ": " + message;
    }

    static String decode(String field) {
        return URLDecoder.decode(field, StandardCharsets.UTF_8);
    }

    static String result(String id, String status, String source, long copied, long length, String streamed,
            String stored, String expected, String reason) {
        String[] fields = {id, status, source, Long.toString(copied), Long.toString(length), streamed, stored,
            expected, reason, ENGINE};
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < fields.length; i++) {
            if (i > 0) {
                out.append('\t');
            }
            out.append(URLEncoder.encode(fields[i], StandardCharsets.UTF_8));
        }
        return out.toString();
    }
}
