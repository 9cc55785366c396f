package ikatkit;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.search.BulkScorer;
import org.apache.lucene.search.HitQueue;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.LeafCollector;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.Scorable;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.ScoreMode;
import org.apache.lucene.search.Sort;
import org.apache.lucene.search.Weight;
import org.apache.lucene.util.NumericUtils;

/**
 * One query's top n scored on {@code threads} threads, the same hits and scores as
 * {@code IndexSearcher.search(query, n)} on one thread (ties by doc id).
 *
 * <p>The index is cut into parts of at most {@code partDocs} documents: doc-id ranges of its segments, so that an
 * index merged into one segment (as prebuilt ones often are) splits as well as one of many segments; Lucene 9.9's
 * own concurrent search slices by whole segments only. The threads (the caller and {@code threads - 1} pooled ones)
 * take the parts in doc-id order, whichever is free next; each part is scored by a bulk scorer of its own
 * ({@code weight.bulkScorer(leaf).score(collector, liveDocs, min, max)}) into its thread's top-n queue. A bound
 * shared by the threads is handed to every scorer as its minimum competitive score, so block-max WAND / MaxScore
 * skip what cannot enter the top n in every part: the best n-th hit any full queue holds, or, once every thread has
 * ceil(n / threads) hits, the lowest of their ceil(n / threads)-th hits (together they hold n hits at or above it;
 * each thread seeing about 1/threads of the documents, this is near the n-th of all seen so far, where the first
 * bound is near the (threads * n)-th; docs/benchmarks.md, "One query on every core"). Exactness: a
 * thread's documents come in increasing order, so a hit tying its queue's n-th score ranks below it (HitQueue's
 * order); a document of another part ties the shared n-th hit only to lose when it comes after it, so the bound is
 * raised to the next float only for parts that start after that hit. No total hit count is kept (Lucene's
 * {@code totalHitsThreshold} only decides when counting may stop and pruning start; pruning from the first full
 * queue on skips only documents outside the top n).
 */
public final class ParallelSearch implements AutoCloseable {
  /** Collected hits between two reads of the shared bound. */
  private static final int CHECK_EVERY = 32;

  private final IndexSearcher searcher;
  private final int threads;
  private final List<Part> parts = new ArrayList<>();
  private final ThreadPoolExecutor pool;

  /** Parts of at most {@code partDocs} documents ({@code <= 0}: four parts a thread). */
  public ParallelSearch(IndexSearcher searcher, int threads, int partDocs) {
    this.searcher = searcher;
    this.threads = Math.max(1, threads);
    int maxDoc = searcher.getIndexReader().maxDoc();
    int size = partDocs > 0 ? partDocs : Math.max(1, (int) Math.ceil(maxDoc / (4.0 * this.threads)));
    for (LeafReaderContext leaf : searcher.getIndexReader().leaves()) {
      int docs = leaf.reader().maxDoc();
      int pieces = Math.max(1, (int) Math.ceil(docs / (double) size));
      for (int i = 0; i < pieces; i++) {
        parts.add(new Part(leaf, (int) ((long) docs * i / pieces), (int) ((long) docs * (i + 1) / pieces)));
      }
    }
    // the caller scores parts too; the pooled threads end after a minute without a query
    pool = new ThreadPoolExecutor(Math.max(1, this.threads - 1), Math.max(1, this.threads - 1),
        60, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), runnable -> {
          Thread thread = new Thread(runnable, "ikatkit-parallel-search");
          thread.setDaemon(true);
          return thread;
        });
    pool.allowCoreThreadTimeOut(true);
  }

  /** How many parts the index is cut into. */
  public int parts() {
    return parts.size();
  }

  /** {@link TopHits#search}'s ranking with the top {@code k + spare} found by {@link #top}. */
  public TopHits search(Query query, int k, int spare, Sort sort, String idField)
      throws IOException, InterruptedException, ExecutionException {
    return TopHits.ranked(searcher, query, top(query, k + spare), k, spare, sort, idField);
  }

  /** The top {@code n} hits, score descending, ties by doc id ascending: {@code searcher.search(query, n)}'s. */
  public ScoreDoc[] top(Query query, int n) throws IOException, InterruptedException, ExecutionException {
    int capped = Math.min(n, Math.max(1, searcher.getIndexReader().maxDoc()));
    Weight weight = searcher.createWeight(searcher.rewrite(query), ScoreMode.TOP_SCORES, 1f);
    Shared shared = new Shared(threads);
    List<Future<List<ScoreDoc>>> helpers = new ArrayList<>();
    List<AtomicBoolean> claims = new ArrayList<>();  // set by whoever comes first: the helper or the caller
    for (int i = 1; i < threads; i++) {
      AtomicBoolean claim = new AtomicBoolean();
      claims.add(claim);
      int slot = i;
      helpers.add(pool.submit(() -> claim.compareAndSet(false, true) ? score(weight, capped, shared, slot)
                                                                      : new ArrayList<ScoreDoc>()));
    }
    List<ScoreDoc> found = new ArrayList<>();
    try {
      found.addAll(score(weight, capped, shared, 0));
      for (int i = 0; i < helpers.size(); i++) {
        if (claims.get(i).compareAndSet(false, true)) {  // not started (a busy machine): not waited for
          helpers.get(i).cancel(false);
        } else {
          found.addAll(helpers.get(i).get());
        }
      }
    } finally {
      shared.next.set(parts.size());  // a failure: the other threads take no further part
    }
    ScoreDoc[] hits = found.toArray(new ScoreDoc[0]);
    Arrays.sort(hits, (a, b) -> a.score != b.score ? Float.compare(b.score, a.score) : Integer.compare(a.doc, b.doc));
    return hits.length > capped ? Arrays.copyOf(hits, capped) : hits;
  }

  /** One thread's work: parts taken in order until none is left, their hits in one top-n queue. */
  private List<ScoreDoc> score(Weight weight, int n, Shared shared, int slot) throws IOException {
    Collector collector = new Collector(new HitQueue(n, true), new HitQueue((n + threads - 1) / threads, true),
        shared, slot);
    for (int p = shared.next.getAndIncrement(); p < parts.size(); p = shared.next.getAndIncrement()) {
      Part part = parts.get(p);
      BulkScorer scorer = weight.bulkScorer(part.leaf);
      if (scorer != null) {
        collector.start(part);
        scorer.score(collector, part.leaf.reader().getLiveDocs(), part.min, part.max);
      }
    }
    return collector.hits();
  }

  @Override
  public void close() {
    pool.shutdownNow();
  }

  /** Documents {@code [min, max)} of a segment. */
  private static final class Part {
    final LeafReaderContext leaf;
    final int min;
    final int max;

    Part(LeafReaderContext leaf, int min, int max) {
      this.leaf = leaf;
      this.min = min;
      this.max = max;
    }
  }

  /** What the threads of one query share: the next part to take and the bound. */
  private static final class Shared {
    final AtomicInteger next = new AtomicInteger();
    /** The best n-th hit of a full queue, as {@link #key}; {@code Long.MIN_VALUE}: none yet. */
    final AtomicLong bound = new AtomicLong(Long.MIN_VALUE);
    /** Per thread, the key of its ceil(n / threads)-th hit; {@code Long.MIN_VALUE}: not that many yet. */
    final AtomicLongArray shares;

    Shared(int threads) {
      shares = new AtomicLongArray(threads);
      for (int i = 0; i < threads; i++) {
        shares.set(i, Long.MIN_VALUE);
      }
    }

    /** Publishes a thread's share; once every thread has one, the lowest is a bound (their hits number n). */
    void share(int slot, long key) {
      shares.set(slot, key);
      long low = Long.MAX_VALUE;
      for (int i = 0; i < shares.length(); i++) {
        low = Math.min(low, shares.get(i));
      }
      if (low != Long.MIN_VALUE) {
        bound.accumulateAndGet(low, Math::max);
      }
    }

    /** Ordered as the ranking: higher score first, then lower doc. */
    static long key(float score, int doc) {
      return ((long) NumericUtils.floatToSortableInt(score) << 32) | (Integer.MAX_VALUE - doc);
    }

    static float score(long key) {
      return NumericUtils.sortableIntToFloat((int) (key >> 32));
    }

    static int doc(long key) {
      return Integer.MAX_VALUE - (int) (key & 0xffffffffL);
    }
  }

  /** A thread's top-n collector over the parts it scores (their documents in increasing order). */
  private static final class Collector implements LeafCollector {
    private final HitQueue queue;
    private final HitQueue top;  // the best ceil(n / threads) of queue's hits
    private final Shared shared;
    private final int slot;
    private ScoreDoc bottom;
    private ScoreDoc topBottom;
    private Scorable scorer;
    private float minCompetitive;
    private int docBase;
    private int first;  // the first doc (index-wide) of the part scored
    private int collected;

    Collector(HitQueue queue, HitQueue top, Shared shared, int slot) {
      this.queue = queue;
      this.top = top;
      this.shared = shared;
      this.slot = slot;
      this.bottom = queue.top();
      this.topBottom = top.top();
    }

    void start(Part part) {
      docBase = part.leaf.docBase;
      first = docBase + part.min;
    }

    @Override
    public void setScorer(Scorable scorer) throws IOException {
      this.scorer = scorer;
      minCompetitive = Float.NEGATIVE_INFINITY;
      raise();
    }

    @Override
    public void collect(int doc) throws IOException {
      float score = scorer.score();
      if (++collected % CHECK_EVERY == 0) {
        raise();
      }
      if (score <= bottom.score) {  // a later doc with an equal score ranks below (HitQueue's order)
        return;
      }
      bottom.doc = docBase + doc;
      bottom.score = score;
      bottom = queue.updateTop();
      if (score > topBottom.score) {
        topBottom.doc = docBase + doc;
        topBottom.score = score;
        topBottom = top.updateTop();
        if (topBottom.score != Float.NEGATIVE_INFINITY) {
          shared.share(slot, Shared.key(topBottom.score, topBottom.doc));
        }
      }
      if (bottom.score != Float.NEGATIVE_INFINITY) {  // full (the sentinels score -infinity)
        long key = Shared.key(bottom.score, bottom.doc);
        shared.bound.accumulateAndGet(key, Math::max);
        raise();
      }
    }

    /** The scorer's minimum competitive score from this queue's n-th hit and the shared bound. */
    private void raise() throws IOException {
      float floor = bottom.score == Float.NEGATIVE_INFINITY ? bottom.score : Math.nextUp(bottom.score);
      long bound = shared.bound.get();
      if (bound != Long.MIN_VALUE) {
        float score = Shared.score(bound);
        floor = Math.max(floor, first > Shared.doc(bound) ? Math.nextUp(score) : score);
      }
      if (floor > minCompetitive) {
        scorer.setMinCompetitiveScore(floor);
        minCompetitive = floor;
      }
    }

    List<ScoreDoc> hits() {
      List<ScoreDoc> hits = new ArrayList<>();
      while (queue.size() > 0) {
        ScoreDoc hit = queue.pop();
        if (hit.score != Float.NEGATIVE_INFINITY) {
          hits.add(hit);
        }
      }
      return hits;
    }
  }
}
